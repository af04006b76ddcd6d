//go:build linux

package iptables

import (
	"bytes"
	"context"

	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/metrics"
	utiliptables "k8s.io/net-utils/iptables"
)

// CleanupLeftovers removes every chain and rule the iptables proxier creates,
// for both IP families (where the iptables binaries exist). Kubelet's
// KUBE-FIREWALL chain and its jumps are left alone. It returns true if an
// error was encountered; errors are logged.
//
// With both iptables backends installed it cleans the one that holds the
// host's rules (utiliptables.ChooseBackend in auto mode, as kube-proxy
// itself runs): cleaning the plain `iptables` one would miss rules left in
// the other.
func CleanupLeftovers(ctx context.Context) (encounteredError bool) {
	// Every backend that may hold the rules, not only the one detected now: the mode
	// may have run on the other (a host that switched, or ipvs and iptables modes
	// each detecting differently as rules came and went).
	for _, ipt := range utiliptables.NewBestEffortEveryBackend() {
		if cleanupLeftoversForFamily(ctx, ipt) {
			encounteredError = true
		}
	}
	return encounteredError
}

// cleanupLeftoversForFamily is CleanupLeftovers for one iptables interface.
func cleanupLeftoversForFamily(ctx context.Context, ipt utiliptables.Interface) (encounteredError bool) {
	logger := klog.FromContext(ctx).WithValues("protocol", ipt.Protocol())

	// Unlink first: a chain still referenced cannot be deleted.
	for _, j := range jumpRules {
		if err := ipt.DeleteRule(j.Table, j.Src, j.Args()...); err != nil && !utiliptables.IsNotFoundError(err) {
			logger.Error(err, "Error removing iptables jump rule", "table", j.Table, "chain", j.Src, "target", j.Dst)
			encounteredError = true
		}
	}

	tables := []struct {
		table utiliptables.Table
		fixed []utiliptables.Chain
	}{
		{utiliptables.TableNAT, []utiliptables.Chain{kubeServicesChain, kubeNodePortsChain, kubePostroutingChain, kubeMarkMasqChain, kubeProxyCanaryChain}},
		{utiliptables.TableFilter, []utiliptables.Chain{kubeServicesChain, kubeExternalServicesChain, kubeForwardChain, kubeNodePortsChain, kubeProxyFirewallChain, kubeProxyCanaryChain}},
	}
	var save bytes.Buffer
	for _, t := range tables {
		save.Reset()
		if err := ipt.SaveInto(t.table, &save); err != nil {
			logger.Error(err, "Failed to execute iptables-save", "table", t.table)
			encounteredError = true
			continue
		}
		existing := utiliptables.GetChainsFromTable(save.Bytes())
		var doomed []utiliptables.Chain
		for _, c := range t.fixed {
			if existing.Has(c) {
				doomed = append(doomed, c)
			}
		}
		// Service chains only ever exist in nat, but a filter-table
		// KUBE-SVC-* would be ours too.
		for c := range existing {
			if isServiceChainName(string(c)) {
				doomed = append(doomed, c)
			}
		}
		if len(doomed) == 0 {
			continue
		}
		var chains, rules ruleBuf
		chains.line("*" + string(t.table))
		for _, c := range doomed {
			chains.chainLine(c) // flushes it, dropping references between our chains
			rules.line("-X", string(c))
		}
		rules.line("COMMIT")
		data := append(chains.b, rules.b...)
		if err := ipt.Restore(t.table, data, utiliptables.NoFlushTables, utiliptables.RestoreCounters); err != nil {
			logger.Error(err, "Failed to execute iptables-restore", "table", t.table)
			metrics.IPTablesRestoreFailuresTotal.WithLabelValues(string(ipt.Protocol())).Inc()
			encounteredError = true
		}
	}

	// The mangle canary is created by Monitor; it may well not exist. It holds
	// the canary rule, so it is emptied first or -X would refuse.
	_ = ipt.FlushChain(utiliptables.TableMangle, kubeProxyCanaryChain)
	_ = ipt.DeleteChain(utiliptables.TableMangle, kubeProxyCanaryChain)
	return encounteredError
}
