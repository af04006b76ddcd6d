//go:build linux

package ipvs

import (
	"net"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// A dry run inside a namespace where kube-proxy runs in ipvs mode (what
// `kube-proxy trace --netns` computes its plan with) must not take the
// Service addresses on the real kube-ipvs0 for node addresses: it would plan
// NodePort virtual servers on every cluster IP, which the live proxier never
// programs. Found by test/e2e's TestIPVS in a QEMU guest.
func TestDryRunNodeAddressesLeaveOutKubeIPVS0(t *testing.T) {
	cidr := func(s string) net.Addr {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return n
	}
	host := []hostInterface{
		{name: "lo", addrs: func() ([]net.Addr, error) { return []net.Addr{cidr("127.0.0.1/8")}, nil }},
		{name: "eth0", addrs: func() ([]net.Addr, error) { return []net.Addr{cidr("198.18.0.1/24")}, nil }},
		{name: defaultDummyDevice, addrs: func() ([]net.Addr, error) {
			return []net.Addr{cidr("198.19.0.10/32"), cidr("198.18.100.10/32")}, nil
		}},
	}
	orig := hostInterfaces
	t.Cleanup(func() { hostInterfaces = orig })
	hostInterfaces = func() ([]hostInterface, error) { return host, nil }

	for _, tc := range []struct {
		name   string
		nw     proxyutil.NetworkInterfacer
		except string
		want   []string
	}{
		{"host interfaces without kube-ipvs0", proxyutil.RealNetwork{}, defaultDummyDevice, []string{"198.18.0.1"}},
		{"host interfaces, nothing left out", proxyutil.RealNetwork{}, "", []string{"198.18.0.1", "198.18.100.10", "198.19.0.10"}},
		// The Node's addresses (a dry run from manifests) are not the host's.
		{"static node addresses", proxyutil.StaticNetwork{IPs: []net.IP{net.ParseIP("198.19.0.10"), net.ParseIP("198.18.0.7")}},
			defaultDummyDevice, []string{"198.18.0.7", "198.19.0.10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &memNetlink{nw: tc.nw, bound: map[string][]string{}}
			got, err := h.GetAllLocalAddressesExcept(tc.except)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(sets.New(tc.want...)) {
				t.Errorf("GetAllLocalAddressesExcept(%q) = %v, want %v", tc.except, sets.List(got), tc.want)
			}
		})
	}
}
