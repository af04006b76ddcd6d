//go:build linux

package nftables

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// The proxier reads and sets syncer state only through these accessors.
func TestSyncerAccessors(t *testing.T) {
	tf := families[0]
	s, _ := newTestSyncer(t, tf, func(c *syncerConfig) {
		c.rejectProtocols = []v1.Protocol{v1.ProtocolUDP}
		c.localhostEnabled = true
	})
	if got := s.masqueradeMark(); got != "0x00004000" {
		t.Errorf("masqueradeMark() = %q, want 0x00004000 (bit 14)", got)
	}
	if !s.rejectsLocalhostNodePort(v1.ProtocolUDP) || s.rejectsLocalhostNodePort(v1.ProtocolTCP) {
		t.Error("rejectsLocalhostNodePort does not follow the configured protocols")
	}
	for _, tc := range []struct {
		cidrs   string
		changed bool
	}{
		{tf.svcCIDR, false}, // newTestSyncer set it already
		{"172.30.0.0/16,172.31.0.0/16", true},
		{"172.30.0.0/16,172.31.0.0/16", false},
		{"", true},
	} {
		if got := s.setServiceCIDRs(tc.cidrs); got != tc.changed {
			t.Errorf("setServiceCIDRs(%q) changed = %v, want %v", tc.cidrs, got, tc.changed)
		}
	}

	noLocal := tsvc{ns: "ns5", name: "svc5", portName: "p80", clusterIP: "172.30.0.45", port: 80, nodePort: 3005, extLocal: true,
		eps: []tep{{ip: "10.180.2.5", port: 80}}}
	s.useInlineMaps()
	if _, err := s.sync(context.Background(), syncInput{full: true, services: models(tf.ip, noLocal)}); err != nil {
		t.Fatal(err)
	}
	if r := s.view.owners[ownerOf(noLocal)]; r == nil || len(r.slots) != 0 {
		t.Error("after useInlineMaps the rules still use endpoint map slots")
	}
	if _, err := s.sync(context.Background(), syncInput{removed: []string{ownerOf(noLocal)}}); err != nil {
		t.Fatal(err)
	}
	if !s.staleChainsPending() {
		t.Error("removing a service port left no stale chain pending")
	}
}
