//go:build linux

package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// Manifests are read whole before the NodeManager starts, so a Node they
// lack will not appear by waiting: a dry run answers at once, without the
// Node when it can do without (as upstream does after its 30s wait), and
// fails at once when NodeCIDR mode needs the Node's PodCIDRs.
func TestDryRunWithoutTheNodeDoesNotWait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "node IPs fall back", args: []string{"--proxy-mode=nftables"}},
		{name: "NodeCIDR needs the Node", args: []string{"--proxy-mode=iptables", "--detect-local-mode=NodeCIDR"},
			wantErr: `node "no-such-node" does not exist, and detect-local-mode NodeCIDR needs its spec.podCIDRs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			defer cancel()
			start := time.Now()
			args := append([]string{"--manifests=" + clusterManifests, "--hostname-override=no-such-node"}, tc.args...)
			s, out, err := newDryRunServer(ctx, t, args...)
			if err == nil {
				err = s.Run(ctx)
			}
			// Far below the 30s (IPs) and 5min (PodCIDRs) a cluster is given.
			if elapsed := time.Since(start); elapsed > 10*time.Second {
				t.Errorf("took %v: waited for a Node the manifests do not have", elapsed)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "10.96.0.10") {
				t.Errorf("no rules printed:\n%s", out)
			}
		})
	}
}
