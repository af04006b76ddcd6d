//go:build linux

package app

import (
	"slices"
	"testing"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// TestPlatformCleanupsSocketLB: the socket load balancer is removed at --cleanup and at
// every start without it (whatever the mode), and left alone by a start with it.
func TestPlatformCleanupsSocketLB(t *testing.T) {
	for _, tc := range []struct {
		mode    kubeproxyconfig.ProxyMode
		cleanup bool
		enabled bool
		want    bool
	}{
		{kubeproxyconfig.ProxyModeNFTables, false, false, true},
		{kubeproxyconfig.ProxyModeIPVS, false, false, true},
		{kubeproxyconfig.ProxyModeNFTables, false, true, false},
		{kubeproxyconfig.ProxyModeIPTables, false, true, false},
		{kubeproxyconfig.ProxyModeNFTables, true, true, true},
		{kubeproxyconfig.ProxyModeIPTables, true, false, true},
	} {
		got := platformCleanups(tc.mode, tc.cleanup, socketLBOptions{enabled: tc.enabled})
		var names []string
		for n := range got {
			names = append(names, n)
		}
		slices.Sort(names)
		if has := got["socketlb"] != nil; has != tc.want {
			t.Errorf("mode %s cleanup=%t socket-lb=%t: cleanups %v, want socketlb=%t", tc.mode, tc.cleanup, tc.enabled, names, tc.want)
		}
	}
}
