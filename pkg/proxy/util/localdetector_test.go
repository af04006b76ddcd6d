package util

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLocalDetectors(t *testing.T) {
	tests := []struct {
		name                 string
		d                    LocalTrafficDetector
		implemented          bool
		local, notLocal      []string
		localNFT, notLocalNF []string
	}{
		{
			name: "no-op", d: NewNoOpLocalDetector(),
		},
		{
			name: "ipv4 cidr", d: NewDetectLocalByCIDR("10.0.0.0/14"), implemented: true,
			local: []string{"-s", "10.0.0.0/14"}, notLocal: []string{"!", "-s", "10.0.0.0/14"},
			localNFT: []string{"ip", "saddr", "10.0.0.0/14"}, notLocalNF: []string{"ip", "saddr", "!=", "10.0.0.0/14"},
		},
		{
			name: "ipv6 cidr", d: NewDetectLocalByCIDR("2002:0:0:1234::/64"), implemented: true,
			local: []string{"-s", "2002:0:0:1234::/64"}, notLocal: []string{"!", "-s", "2002:0:0:1234::/64"},
			localNFT: []string{"ip6", "saddr", "2002:0:0:1234::/64"}, notLocalNF: []string{"ip6", "saddr", "!=", "2002:0:0:1234::/64"},
		},
		{
			name: "bridge", d: NewDetectLocalByBridgeInterface("eth0"), implemented: true,
			local: []string{"-i", "eth0"}, notLocal: []string{"!", "-i", "eth0"},
			localNFT: []string{"iifname", "eth0"}, notLocalNF: []string{"iifname", "!=", "eth0"},
		},
		{
			name: "prefix", d: NewDetectLocalByInterfaceNamePrefix("veth"), implemented: true,
			local: []string{"-i", "veth+"}, notLocal: []string{"!", "-i", "veth+"},
			localNFT: []string{"iifname", "veth*"}, notLocalNF: []string{"iifname", "!=", "veth*"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.d.IsImplemented(); got != tc.implemented {
				t.Errorf("IsImplemented = %v, want %v", got, tc.implemented)
			}
			for _, c := range []struct {
				what      string
				got, want []string
			}{
				{"IfLocal", tc.d.IfLocal(), tc.local},
				{"IfNotLocal", tc.d.IfNotLocal(), tc.notLocal},
				{"IfLocalNFT", tc.d.IfLocalNFT(), tc.localNFT},
				{"IfNotLocalNFT", tc.d.IfNotLocalNFT(), tc.notLocalNF},
			} {
				if diff := cmp.Diff(c.want, c.got, cmp.Comparer(func(a, b []string) bool {
					return len(a) == len(b) && (len(a) == 0 || cmp.Equal(a, b))
				})); diff != "" {
					t.Errorf("%s (-want +got):\n%s", c.what, diff)
				}
			}
		})
	}
}
