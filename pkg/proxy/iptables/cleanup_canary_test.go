//go:build linux

package iptables

import (
	"testing"

	"k8s.io/klog/v2/ktesting"
	utiliptables "k8s.io/net-utils/iptables"
	iptablestest "k8s.io/net-utils/iptables/testing"
)

// A kube-proxy killed before its Monitor could clean up leaves the canary chains
// behind, each holding the canary rule; cleanup must still remove them.
func TestCleanupLeftoversRemovesCanaryWithRule(t *testing.T) {
	ipt := iptablestest.NewFake()
	tables := []utiliptables.Table{utiliptables.TableMangle, utiliptables.TableNAT, utiliptables.TableFilter}
	for _, table := range tables {
		if _, err := ipt.EnsureChain(table, kubeProxyCanaryChain); err != nil {
			t.Fatal(err)
		}
		if _, err := ipt.EnsureRule(utiliptables.Append, table, kubeProxyCanaryChain, "-j", "RETURN"); err != nil {
			t.Fatal(err)
		}
	}
	_, ctx := ktesting.NewTestContext(t)
	cleanupLeftoversForFamily(ctx, ipt)
	for _, table := range tables {
		if exists, _ := ipt.ChainExists(table, kubeProxyCanaryChain); exists {
			t.Errorf("cleanup left %s in table %s", kubeProxyCanaryChain, table)
		}
	}
}
