//go:build linux

package iptables

import (
	"bytes"
	"errors"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/util/jumprules"
	"k8s.io/kube-proxy/pkg/proxy/util/nfacct"
	utiliptables "k8s.io/net-utils/iptables"
)

// jumpRules are the rules in builtin chains leading to ours. Other software
// owns rules in the builtin chains too, so they are never flushed and
// rewritten: a full sync inserts the jumps it finds missing
// (ensureJumpRules).
var jumpRules = []jumprules.Jump{
	{Table: utiliptables.TableFilter, Dst: kubeExternalServicesChain, Src: utiliptables.ChainInput, Comment: "kubernetes externally-visible service portals", ExtraArgs: []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{Table: utiliptables.TableFilter, Dst: kubeExternalServicesChain, Src: utiliptables.ChainForward, Comment: "kubernetes externally-visible service portals", ExtraArgs: []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{Table: utiliptables.TableFilter, Dst: kubeNodePortsChain, Src: utiliptables.ChainInput, Comment: "kubernetes health check service ports"},
	{Table: utiliptables.TableFilter, Dst: kubeServicesChain, Src: utiliptables.ChainForward, Comment: "kubernetes service portals", ExtraArgs: []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{Table: utiliptables.TableFilter, Dst: kubeServicesChain, Src: utiliptables.ChainOutput, Comment: "kubernetes service portals", ExtraArgs: []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{Table: utiliptables.TableFilter, Dst: kubeForwardChain, Src: utiliptables.ChainForward, Comment: "kubernetes forwarding rules"},
	{Table: utiliptables.TableFilter, Dst: kubeProxyFirewallChain, Src: utiliptables.ChainInput, Comment: "kubernetes load balancer firewall", ExtraArgs: []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{Table: utiliptables.TableFilter, Dst: kubeProxyFirewallChain, Src: utiliptables.ChainOutput, Comment: "kubernetes load balancer firewall", ExtraArgs: []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{Table: utiliptables.TableFilter, Dst: kubeProxyFirewallChain, Src: utiliptables.ChainForward, Comment: "kubernetes load balancer firewall", ExtraArgs: []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{Table: utiliptables.TableNAT, Dst: kubeServicesChain, Src: utiliptables.ChainOutput, Comment: "kubernetes service portals"},
	{Table: utiliptables.TableNAT, Dst: kubeServicesChain, Src: utiliptables.ChainPrerouting, Comment: "kubernetes service portals"},
	{Table: utiliptables.TableNAT, Dst: kubePostroutingChain, Src: utiliptables.ChainPostrouting, Comment: "kubernetes postrouting rules"},
}

// kubeletJumpRules duplicate jumps kubelet creates. Cleanup leaves them.
var kubeletJumpRules = []jumprules.Jump{
	{Table: utiliptables.TableFilter, Dst: kubeletFirewallChain, Src: utiliptables.ChainInput},
	{Table: utiliptables.TableFilter, Dst: kubeletFirewallChain, Src: utiliptables.ChainOutput},
}

// syncer is the proxier's kernel side: it ensures the jumps from builtin
// chains and the nfacct counters, reads back our chains on full syncs, and
// runs iptables-restore. A dry run gives it a dryRunIPTables.
type syncer struct {
	ipt    utiliptables.Interface
	nfacct nfacct.Interface // nil: no counters
	family string
	logger klog.Logger

	// saveBuf holds this sync's iptables-save of nat if natSaved, so the
	// leftover scan reuses what ensureJumpRules read.
	saveBuf  bytes.Buffer
	natSaved bool
	// data is the restore input, reused between syncs up to
	// keptRestoreBytes (see restore).
	data []byte
	// chunks splits large nat restores on iptables-nft (chunks.go).
	chunks chunking
}

var errSyncFailed = errors.New("iptables sync failed")

// prepareFull runs at the start of a full sync: it ensures the jump rules
// and the nfacct counters, and returns the counters that exist.
func (s *syncer) prepareFull() (counters nfacctCounters, err error) {
	s.natSaved = false
	if err := s.ensureJumpRules(); err != nil {
		s.logger.Error(err, "Failed to ensure jump rules from builtin chains")
		return counters, errSyncFailed
	}
	if s.nfacct != nil {
		counters.invalidDropped = s.ensureCounter(metrics.IPTablesCTStateInvalidDroppedNFAcctCounter)
		counters.localhostAccepted = s.ensureCounter(metrics.LocalhostNodePortAcceptedNFAcctCounter)
	}
	return counters, nil
}

func (s *syncer) ensureCounter(name string) bool {
	if err := s.nfacct.Ensure(name); err != nil {
		s.logger.Error(err, "Failed to create nfacct counter; the corresponding metric will not be updated", "counter", name)
		return false
	}
	return true
}

// ensureJumpRules creates our top-level chains and the jumps to them from
// the builtin chains, with jumprules.Ensure: the current rules are read
// first (two iptables-save runs, whose nat output the leftover scan
// reuses), so a full sync of a node that has them makes no further call;
// what is missing goes in one iptables-restore. On a cold start that is all
// 14 jumps, which as Ensure calls were 42 iptables executions, about 100 ms
// of a 1k-Service first sync on iptables-legacy. The dry run
// (jumprules.OneByOne) gets one Ensure call per chain and jump.
func (s *syncer) ensureJumpRules() error {
	return jumprules.Ensure(s.logger, s.ipt, allJumps, nil, s.keepNATSave)
}

// keepNATSave keeps the nat table's save for natChains.
func (s *syncer) keepNATSave(table utiliptables.Table, save []byte) {
	if table == utiliptables.TableNAT {
		s.saveBuf.Reset()
		s.saveBuf.Write(save)
		s.natSaved = true
	}
}

// allJumps are jumpRules then kubeletJumpRules.
var allJumps = append(slices.Clip(jumpRules), kubeletJumpRules...)

// natChains returns the chains of the kernel's nat table, to find leftovers
// of an earlier process or of a failed sync; ok is false if iptables-save
// failed. Only full syncs call it.
func (s *syncer) natChains() (chains sets.Set[utiliptables.Chain], ok bool) {
	var err error
	if !s.natSaved {
		s.saveBuf.Reset()
		err = s.ipt.SaveInto(utiliptables.TableNAT, &s.saveBuf)
	}
	s.natSaved = false
	if err != nil {
		s.logger.Error(err, "Failed to execute iptables-save: stale chains will not be deleted")
		return nil, false
	}
	return utiliptables.GetChainsFromTable(s.saveBuf.Bytes()), true
}

// keptRestoreBytes is the largest restore input buffer kept for the next
// sync.
const keptRestoreBytes = 4 << 20

// emptyRestore is the restore input of a sync with nothing to write.
const emptyRestore = "*nat\nCOMMIT\n"

// restore runs iptables-restore of t as restoreInput builds it, and reports
// whether it did: a sync with nothing to write (no table, chain, rule or
// stale chain) makes no call, as in nftables mode, so an explicit SyncNow
// right after the informers' own sync costs nothing.
func (s *syncer) restore(t *tables, filter, natTop bool, stale []utiliptables.Chain, tableChains int) (bool, error) {
	s.data = s.chunks.restoreInput(s.data[:0], t, filter, natTop, stale, s.chunks.limit(s.ipt, tableChains))
	if string(s.data) == emptyRestore {
		s.logger.V(4).Info("Nothing to restore")
		return false, nil
	}
	s.logger.V(9).Info("Restoring iptables", "rules", s.data)
	err := s.ipt.RestoreAll(s.data, utiliptables.NoFlushTables, utiliptables.RestoreCounters)
	if cap(s.data) > keptRestoreBytes && err == nil {
		// A full sync's input is the whole ruleset (~40 MB at 10k Services
		// on legacy); kept, it was ~a fifth of the live heap for the
		// process's life, while a partial sync's input is a few chains.
		s.data = nil
	}
	if err == nil {
		return true, nil
	}
	var pErr utiliptables.ParseError
	if errors.As(err, &pErr) {
		lines := utiliptables.ExtractLines(s.data, pErr.Line(), 3)
		s.logger.Error(pErr, "Failed to execute iptables-restore", "rules", lines)
	} else {
		s.logger.Error(err, "Failed to execute iptables-restore")
	}
	metrics.IPTablesRestoreFailuresTotal.WithLabelValues(s.family).Inc()
	return false, errSyncFailed
}
