//go:build linux

package app

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// A trace computed from manifests answers for the node named by
// --hostname-override, wherever it runs: NodePorts are served on that
// Node's addresses (or --local-addresses), not on those of the machine
// running the trace, which has none of them.
func TestTraceComputedNodePortUsesNodeAddresses(t *testing.T) {
	// A NodePort of an external-policy-Cluster Service masquerades.
	dnat := []string{"ACCEPT dnat=198.19.1.12:8080 masq", "ACCEPT dnat=198.19.2.12:8080 masq"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"nftables, the Node's InternalIP", []string{"--proxy-mode=nftables", "--to=198.18.0.10:30080"}, dnat},
		{"iptables, --nodeport-addresses primary", []string{"--proxy-mode=iptables", "--nodeport-addresses=primary", "--to=198.18.0.10:30080"}, dnat},
		{"nftables, --local-addresses", []string{"--proxy-mode=nftables", "--nodeport-addresses=198.18.0.0/16",
			"--local-addresses=198.18.0.99", "--to=198.18.0.99:30080"}, dnat},
		// --local-addresses replaces the Node's addresses.
		{"nftables, not a --local-addresses", []string{"--proxy-mode=nftables", "--nodeport-addresses=198.18.0.0/16",
			"--local-addresses=198.18.0.99", "--to=198.18.0.10:30080"}, []string{"ACCEPT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--manifests=" + clusterManifests, "--hostname-override=node-1", "-o", "json",
				"--from=203.0.113.9", "--in-interface=eth0"}, tc.args...)
			out, err := runTrace(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			rep := decodeReport(t, out)
			if got := outcomeList(rep.Result); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q\n%s", got, tc.want, out)
			}
		})
	}
}

// `kube-proxy --dry-run --manifests` in nftables mode programs the Node's
// addresses into nodeport-ips, not the addresses of the machine it runs on.
func TestDryRunNodePortIPsAreTheNodes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	s, out, err := newDryRunServer(ctx, t, "--manifests="+clusterManifests, "--hostname-override=node-1", "--proxy-mode=nftables")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	var elems []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "add element ip kube-proxy nodeport-ips ") {
			elems = append(elems, line)
		}
	}
	if len(elems) != 1 || !strings.Contains(elems[0], "198.18.0.10") {
		t.Errorf("nodeport-ips elements %q, want the Node's 198.18.0.10 only\n%s", elems, text)
	}
}
