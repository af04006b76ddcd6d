package util_test

import (
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"

	"k8s.io/kube-proxy/pkg/proxy/util"
	fake "k8s.io/kube-proxy/pkg/proxy/util/testing"
)

func hostNetwork() *fake.FakeNetwork {
	nw := fake.NewFakeNetwork()
	ipnet := func(s string) net.Addr {
		ip, n, _ := netutils.ParseCIDRSloppy(s)
		return &net.IPNet{IP: ip, Mask: n.Mask}
	}
	nw.AddInterfaceAddr(&net.Interface{Name: "lo", Index: 1}, []net.Addr{ipnet("127.0.0.1/8"), ipnet("::1/128")})
	nw.AddInterfaceAddr(&net.Interface{Name: "eth0", Index: 2}, []net.Addr{
		ipnet("10.20.30.51/24"), ipnet("2001:db8::1/64"), &net.IPAddr{IP: netutils.ParseIPSloppy("10.20.30.51")},
	})
	nw.AddInterfaceAddr(&net.Interface{Name: "eth1", Index: 3}, []net.Addr{ipnet("100.200.201.1/24"), ipnet("fd00::5/64")})
	return nw
}

func TestNodePortAddresses(t *testing.T) {
	tests := []struct {
		name                 string
		family               v1.IPFamily
		cidrs                []string
		wantString           string
		wantMatchAll         bool
		wantIPv4Loopback     bool
		wantExplicitLoopback bool
		wantIPs              []string
	}{
		{
			name: "v4 default", family: v1.IPv4Protocol, cidrs: nil,
			wantString: "[0.0.0.0/0]", wantMatchAll: true, wantIPv4Loopback: true,
			wantIPs: []string{"10.20.30.51", "100.200.201.1", "127.0.0.1"},
		},
		{
			name: "v6 default", family: v1.IPv6Protocol, cidrs: nil,
			wantString: "[::/0]", wantMatchAll: true,
			wantIPs: []string{"2001:db8::1", "::1", "fd00::5"},
		},
		{
			name: "v6 default when only v4 given", family: v1.IPv6Protocol, cidrs: []string{"10.20.30.0/24"},
			wantString: "[::/0]", wantMatchAll: true,
			wantIPs: []string{"2001:db8::1", "::1", "fd00::5"},
		},
		{
			name: "v4 specific", family: v1.IPv4Protocol, cidrs: []string{"10.20.30.0/24", "fd00::/64"},
			wantString: "[10.20.30.0/24]",
			wantIPs:    []string{"10.20.30.51"},
		},
		{
			name: "v4 loopback explicit", family: v1.IPv4Protocol, cidrs: []string{"127.0.0.0/8", "100.200.201.0/24"},
			wantString: "[127.0.0.0/8 100.200.201.0/24]", wantIPv4Loopback: true, wantExplicitLoopback: true,
			wantIPs: []string{"100.200.201.1", "127.0.0.1"},
		},
		{
			name: "v4 wide cidr containing loopback", family: v1.IPv4Protocol, cidrs: []string{"64.0.0.0/2"},
			wantString: "[64.0.0.0/2]", wantIPv4Loopback: true,
			wantIPs: []string{"100.200.201.1", "127.0.0.1"},
		},
		{
			name: "v6 loopback explicit", family: v1.IPv6Protocol, cidrs: []string{"::1/128"},
			wantString: "[::1/128]", wantExplicitLoopback: true,
			wantIPs: []string{"::1"},
		},
		{
			name: "zero cidr wins", family: v1.IPv4Protocol, cidrs: []string{"10.20.30.0/24", "0.0.0.0/0"},
			wantString: "[10.20.30.0/24 0.0.0.0/0]", wantMatchAll: true, wantIPv4Loopback: true,
			wantIPs: []string{"10.20.30.51", "100.200.201.1", "127.0.0.1"},
		},
		{
			name: "no match", family: v1.IPv4Protocol, cidrs: []string{"192.0.2.0/24"},
			wantString: "[192.0.2.0/24]",
			wantIPs:    []string{},
		},
		{
			name: "invalid entries ignored", family: v1.IPv4Protocol, cidrs: []string{"bogus", "10.20.30.51/32"},
			wantString: "[10.20.30.51/32]",
			wantIPs:    []string{"10.20.30.51"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			npa := util.NewNodePortAddresses(tc.family, tc.cidrs)
			if got := npa.String(); got != tc.wantString {
				t.Errorf("String() = %q, want %q", got, tc.wantString)
			}
			if got := npa.MatchAll(); got != tc.wantMatchAll {
				t.Errorf("MatchAll() = %v, want %v", got, tc.wantMatchAll)
			}
			if got := npa.ContainsIPv4Loopback(); got != tc.wantIPv4Loopback {
				t.Errorf("ContainsIPv4Loopback() = %v, want %v", got, tc.wantIPv4Loopback)
			}
			if got := npa.ContainsExplicitLoopback(); got != tc.wantExplicitLoopback {
				t.Errorf("ContainsExplicitLoopback() = %v, want %v", got, tc.wantExplicitLoopback)
			}
			ips, err := npa.GetNodeIPs(hostNetwork())
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, ip := range ips {
				got = append(got, ip.String())
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.wantIPs, got); diff != "" {
				t.Errorf("GetNodeIPs (-want +got):\n%s", diff)
			}
		})
	}
}

type failingNetwork struct{}

func (failingNetwork) InterfaceAddrs() ([]net.Addr, error) { return nil, errors.New("no netlink") }

func TestGetNodeIPsError(t *testing.T) {
	_, err := util.NewNodePortAddresses(v1.IPv4Protocol, nil).GetNodeIPs(failingNetwork{})
	if err == nil {
		t.Fatal("expected an error")
	}
}

func TestRealNetwork(t *testing.T) {
	// The loopback address exists in every network namespace.
	ips, err := util.NewNodePortAddresses(v1.IPv4Protocol, []string{"127.0.0.0/8"}).GetNodeIPs(util.RealNetwork{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ips, func(ip net.IP) bool { return ip.Equal(net.IPv4(127, 0, 0, 1)) }) {
		t.Errorf("127.0.0.1 not found among %v", ips)
	}
}

func BenchmarkGetNodeIPs(b *testing.B) {
	nw := fake.NewFakeNetwork()
	for i := range 64 {
		ip := net.IPv4(198, 18, byte(i), 1)
		nw.AddInterfaceAddr(&net.Interface{Name: "eth" + string(rune('a'+i%26)) + string(rune('a'+i/26))},
			[]net.Addr{&net.IPNet{IP: ip, Mask: net.CIDRMask(24, 32)}})
	}
	npa := util.NewNodePortAddresses(v1.IPv4Protocol, []string{"198.18.0.0/18", "198.18.128.0/17", "10.0.0.0/8"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := npa.GetNodeIPs(nw); err != nil {
			b.Fatal(err)
		}
	}
}

// StaticNetwork stands for another node's interfaces (a dry run for it):
// nodePortAddresses select among its addresses by family and CIDR.
func TestStaticNetwork(t *testing.T) {
	nw := util.StaticNetwork{IPs: []net.IP{
		netutils.ParseIPSloppy("198.18.0.10"), netutils.ParseIPSloppy("fd00:18::10"), net.IPv4(127, 0, 0, 1),
	}}
	for _, tc := range []struct {
		family v1.IPFamily
		cidrs  []string
		want   []string
	}{
		{v1.IPv4Protocol, []string{"198.18.0.10/32"}, []string{"198.18.0.10"}},
		{v1.IPv4Protocol, nil, []string{"198.18.0.10", "127.0.0.1"}},
		{v1.IPv6Protocol, nil, []string{"fd00:18::10"}},
		{v1.IPv4Protocol, []string{"10.0.0.0/8"}, []string{}},
	} {
		ips, err := util.NewNodePortAddresses(tc.family, tc.cidrs).GetNodeIPs(nw)
		if err != nil {
			t.Fatal(err)
		}
		got := []string{}
		for _, ip := range ips {
			got = append(got, ip.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %v: got %v, want %v", tc.family, tc.cidrs, got, tc.want)
		}
	}
}
