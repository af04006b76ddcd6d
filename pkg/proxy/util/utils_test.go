package util

import (
	"errors"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	sysctltesting "k8s.io/net-utils/sysctl/testing"
	netutils "k8s.io/utils/net"
)

func TestShouldSkipService(t *testing.T) {
	svc := func(typ v1.ServiceType, clusterIP string) *v1.Service {
		return &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc"},
			Spec:       v1.ServiceSpec{Type: typ, ClusterIP: clusterIP},
		}
	}
	tests := []struct {
		name string
		svc  *v1.Service
		want bool
	}{
		{"nil", nil, true},
		{"headless", svc(v1.ServiceTypeClusterIP, v1.ClusterIPNone), true},
		{"no cluster IP", svc(v1.ServiceTypeClusterIP, ""), true},
		{"external name with IP", svc(v1.ServiceTypeExternalName, "10.0.0.1"), true},
		{"cluster IP", svc(v1.ServiceTypeClusterIP, "10.0.0.1"), false},
		{"node port", svc(v1.ServiceTypeNodePort, "fd00::1"), false},
		{"load balancer", svc(v1.ServiceTypeLoadBalancer, "10.0.0.1"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShouldSkipService(tc.svc); got != tc.want {
				t.Errorf("ShouldSkipService = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsZeroCIDR(t *testing.T) {
	tests := []struct {
		cidr string
		want bool
	}{
		{"", false},
		{"0.0.0.0/0", true},
		{"::/0", true},
		{"10.0.0.0/8", false},
		{"::/1", false},
	}
	for _, tc := range tests {
		t.Run(tc.cidr, func(t *testing.T) {
			var n *net.IPNet
			if tc.cidr != "" {
				_, n, _ = net.ParseCIDR(tc.cidr)
			}
			if got := IsZeroCIDR(n); got != tc.want {
				t.Errorf("IsZeroCIDR(%q) = %v, want %v", tc.cidr, got, tc.want)
			}
		})
	}
}

type unknownAddr struct{}

func (unknownAddr) Network() string { return "x" }
func (unknownAddr) String() string  { return "x" }

func TestAddressSet(t *testing.T) {
	addrs := []net.Addr{
		&net.IPNet{IP: netutils.ParseIPSloppy("10.0.0.1"), Mask: net.CIDRMask(24, 32)},
		&net.IPAddr{IP: netutils.ParseIPSloppy("fd00::1")},
		&net.IPNet{IP: netutils.ParseIPSloppy("127.0.0.1"), Mask: net.CIDRMask(8, 32)},
		unknownAddr{},
		&net.IPAddr{IP: netutils.ParseIPSloppy("10.0.0.1")}, // duplicate
	}
	tests := []struct {
		name    string
		isValid func(net.IP) bool
		want    sets.Set[string]
	}{
		{"all", func(net.IP) bool { return true }, sets.New("10.0.0.1", "fd00::1", "127.0.0.1")},
		{"ipv4", func(ip net.IP) bool { return ip.To4() != nil }, sets.New("10.0.0.1", "127.0.0.1")},
		{"non-loopback ipv6", func(ip net.IP) bool { return ip.To4() == nil && !ip.IsLoopback() }, sets.New("fd00::1")},
		{"none", func(net.IP) bool { return false }, sets.New[string]()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := AddressSet(tc.isValid, addrs)
			if !got.Equal(tc.want) {
				t.Errorf("AddressSet = %v, want %v", sets.List(got), sets.List(tc.want))
			}
		})
	}
}

func TestMapIPsByIPFamily(t *testing.T) {
	tests := []struct {
		name   string
		in     []string
		wantV4 []string
		wantV6 []string
	}{
		{"empty", nil, nil, nil},
		{"mixed", []string{"10.0.0.1", "fd00::1", "10.0.0.2"}, []string{"10.0.0.1", "10.0.0.2"}, []string{"fd00::1"}},
		{"invalid and blank dropped", []string{"bogus", " ", "", "10.0.0.1", "1.2.3.4/24"}, []string{"10.0.0.1"}, nil},
		{"leading zeros accepted", []string{"010.000.000.001"}, []string{"10.0.0.1"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := MapIPsByIPFamily(tc.in)
			toStr := func(ips []net.IP) []string {
				var out []string
				for _, ip := range ips {
					out = append(out, ip.String())
				}
				return out
			}
			if diff := cmp.Diff(tc.wantV4, toStr(got[v1.IPv4Protocol])); diff != "" {
				t.Errorf("IPv4 (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantV6, toStr(got[v1.IPv6Protocol])); diff != "" {
				t.Errorf("IPv6 (-want +got):\n%s", diff)
			}
			if len(got) > 2 {
				t.Errorf("unexpected families in %v", got)
			}
		})
	}
}

func TestMapCIDRsByIPFamily(t *testing.T) {
	tests := []struct {
		name   string
		in     []string
		wantV4 []string
		wantV6 []string
	}{
		{"empty", nil, nil, nil},
		{"mixed with spaces", []string{" 10.0.0.0/8", "fd00::/64 ", "192.168.1.5/24"}, []string{"10.0.0.0/8", "192.168.1.0/24"}, []string{"fd00::/64"}},
		{"invalid dropped", []string{"10.0.0.1", "bogus/8", "", "::/0"}, nil, []string{"::/0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := MapCIDRsByIPFamily(tc.in)
			toStr := func(ns []*net.IPNet) []string {
				var out []string
				for _, n := range ns {
					out = append(out, n.String())
				}
				return out
			}
			if diff := cmp.Diff(tc.wantV4, toStr(got[v1.IPv4Protocol])); diff != "" {
				t.Errorf("IPv4 (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantV6, toStr(got[v1.IPv6Protocol])); diff != "" {
				t.Errorf("IPv6 (-want +got):\n%s", diff)
			}
			if len(got) > 2 {
				t.Errorf("unexpected families: %v", got)
			}
		})
	}
}

func TestIPFamilyHelpers(t *testing.T) {
	tests := []struct {
		ip        string
		want      v1.IPFamily
		wantOther v1.IPFamily
	}{
		{"10.0.0.1", v1.IPv4Protocol, v1.IPv6Protocol},
		{"::ffff:10.0.0.1", v1.IPv4Protocol, v1.IPv6Protocol},
		{"fd00::1", v1.IPv6Protocol, v1.IPv4Protocol},
		{"", v1.IPFamilyUnknown, v1.IPv6Protocol},
	}
	for _, tc := range tests {
		t.Run(tc.ip, func(t *testing.T) {
			got := GetIPFamilyFromIP(netutils.ParseIPSloppy(tc.ip))
			if got != tc.want {
				t.Errorf("GetIPFamilyFromIP = %q, want %q", got, tc.want)
			}
			if o := OtherIPFamily(got); o != tc.wantOther {
				t.Errorf("OtherIPFamily(%q) = %q, want %q", got, o, tc.wantOther)
			}
		})
	}
}

func TestAppendPortIfNeeded(t *testing.T) {
	tests := []struct {
		addr string
		port int32
		want string
	}{
		{"10.0.0.1", 80, "10.0.0.1:80"},
		{"10.0.0.1:8080", 80, "10.0.0.1:8080"},
		{"fd00::1", 80, "[fd00::1]:80"},
		{"[fd00::1]:8080", 80, "[fd00::1]:8080"},
		{"0.0.0.0", 10256, "0.0.0.0:10256"},
		{"not-an-ip", 80, "not-an-ip"},
		{"", 80, ""},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			if got := AppendPortIfNeeded(tc.addr, tc.port); got != tc.want {
				t.Errorf("AppendPortIfNeeded(%q, %d) = %q, want %q", tc.addr, tc.port, got, tc.want)
			}
		})
	}
}

func TestEnsureSysctl(t *testing.T) {
	const name = "net/ipv4/ip_forward"
	boom := errors.New("boom")
	tests := []struct {
		name       string
		initial    map[string]int
		getErr     error
		setErr     error
		newVal     int
		wantErr    bool
		wantWrites int
		wantVal    int
	}{
		{"already set", map[string]int{name: 1}, nil, nil, 1, false, 0, 1},
		{"changed", map[string]int{name: 0}, nil, nil, 1, false, 1, 1},
		{"missing is written", nil, nil, nil, 1, false, 1, 1},
		{"read error still writes", map[string]int{name: 1}, boom, nil, 1, false, 1, 1},
		{"write error", map[string]int{name: 0}, nil, boom, 1, true, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := sysctltesting.NewFake()
			for k, v := range tc.initial {
				f.Settings[k] = v
			}
			if tc.getErr != nil {
				f.GetErrors[name] = tc.getErr
			}
			if tc.setErr != nil {
				f.SetErrors[name] = tc.setErr
			}
			err := EnsureSysctl(f, name, tc.newVal)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, boom) {
				t.Errorf("error %v does not wrap the cause", err)
			}
			if len(f.Writes) != tc.wantWrites {
				t.Errorf("writes = %v, want %d", f.Writes, tc.wantWrites)
			}
			if got := f.Settings[name]; got != tc.wantVal {
				t.Errorf("value = %d, want %d", got, tc.wantVal)
			}
		})
	}
}

func TestGetClusterIPByFamily(t *testing.T) {
	tests := []struct {
		name       string
		clusterIP  string
		clusterIPs []string
		families   []v1.IPFamily
		want4      string
		want6      string
	}{
		{"legacy v4", "10.0.0.1", nil, nil, "10.0.0.1", ""},
		{"legacy v6", "fd00::1", nil, nil, "", "fd00::1"},
		{"legacy none", v1.ClusterIPNone, nil, nil, "", ""},
		{"legacy empty", "", nil, nil, "", ""},
		{"single v4", "10.0.0.1", []string{"10.0.0.1"}, []v1.IPFamily{v1.IPv4Protocol}, "10.0.0.1", ""},
		{"dual v6 primary", "fd00::1", []string{"fd00::1", "10.0.0.1"}, []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}, "10.0.0.1", "fd00::1"},
		{"families longer than IPs", "10.0.0.1", []string{"10.0.0.1"}, []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, "10.0.0.1", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := &v1.Service{Spec: v1.ServiceSpec{ClusterIP: tc.clusterIP, ClusterIPs: tc.clusterIPs, IPFamilies: tc.families}}
			if got := GetClusterIPByFamily(v1.IPv4Protocol, svc); got != tc.want4 {
				t.Errorf("IPv4 = %q, want %q", got, tc.want4)
			}
			if got := GetClusterIPByFamily(v1.IPv6Protocol, svc); got != tc.want6 {
				t.Errorf("IPv6 = %q, want %q", got, tc.want6)
			}
		})
	}
	if got := GetClusterIPByFamily(v1.IPv4Protocol, nil); got != "" {
		t.Errorf("nil service: got %q", got)
	}
}

func TestIsVIPMode(t *testing.T) {
	vip, proxy := v1.LoadBalancerIPModeVIP, v1.LoadBalancerIPModeProxy
	tests := []struct {
		name string
		mode *v1.LoadBalancerIPMode
		want bool
	}{
		{"unset", nil, true},
		{"VIP", &vip, true},
		{"Proxy", &proxy, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsVIPMode(v1.LoadBalancerIngress{IP: "1.2.3.4", IPMode: tc.mode}); got != tc.want {
				t.Errorf("IsVIPMode = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIPPart(t *testing.T) {
	tests := []struct{ in, want string }{
		{"10.0.0.1", "10.0.0.1"},
		{"10.0.0.1:80", "10.0.0.1"},
		{"[fd00::1]:80", "fd00::1"},
		{"fd00::1", "fd00::1"},
		{"010.000.000.001:80", "10.0.0.1"},
		{"host:80", ""},
		{"garbage", ""},
		{"", ""},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := IPPart(tc.in); got != tc.want {
				t.Errorf("IPPart(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzIPPart(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "[fd00::1]:80", "1.2.3.4:5", "host:80", "", "[", "::ffff:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := IPPart(s)
		if got != "" && netutils.ParseIPSloppy(got) == nil {
			t.Fatalf("IPPart(%q) = %q, which is not an IP", s, got)
		}
		// AppendPortIfNeeded must yield something SplitHostPort accepts
		// whenever its input was an IP.
		if netutils.ParseIPSloppy(s) != nil {
			if _, _, err := net.SplitHostPort(AppendPortIfNeeded(s, 80)); err != nil {
				t.Fatalf("AppendPortIfNeeded(%q): %v", s, err)
			}
		}
	})
}
