//go:build linux

package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/util/nfacct"
	utiliptables "k8s.io/net-utils/iptables"
)

type jumpRule struct {
	table     utiliptables.Table
	dstChain  utiliptables.Chain
	srcChain  utiliptables.Chain
	comment   string
	extraArgs []string
}

// jumpRules are the rules in builtin chains leading to ours. Other software
// owns rules in the builtin chains too, so they are never flushed and
// rewritten: a full sync inserts the jumps it finds missing
// (ensureJumpRules).
var jumpRules = []jumpRule{
	{utiliptables.TableFilter, kubeExternalServicesChain, utiliptables.ChainInput, "kubernetes externally-visible service portals", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{utiliptables.TableFilter, kubeExternalServicesChain, utiliptables.ChainForward, "kubernetes externally-visible service portals", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{utiliptables.TableFilter, kubeNodePortsChain, utiliptables.ChainInput, "kubernetes health check service ports", nil},
	{utiliptables.TableFilter, kubeServicesChain, utiliptables.ChainForward, "kubernetes service portals", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{utiliptables.TableFilter, kubeServicesChain, utiliptables.ChainOutput, "kubernetes service portals", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{utiliptables.TableFilter, kubeForwardChain, utiliptables.ChainForward, "kubernetes forwarding rules", nil},
	{utiliptables.TableFilter, kubeProxyFirewallChain, utiliptables.ChainInput, "kubernetes load balancer firewall", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{utiliptables.TableFilter, kubeProxyFirewallChain, utiliptables.ChainOutput, "kubernetes load balancer firewall", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{utiliptables.TableFilter, kubeProxyFirewallChain, utiliptables.ChainForward, "kubernetes load balancer firewall", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{utiliptables.TableNAT, kubeServicesChain, utiliptables.ChainOutput, "kubernetes service portals", nil},
	{utiliptables.TableNAT, kubeServicesChain, utiliptables.ChainPrerouting, "kubernetes service portals", nil},
	{utiliptables.TableNAT, kubePostroutingChain, utiliptables.ChainPostrouting, "kubernetes postrouting rules", nil},
}

// kubeletJumpRules duplicate jumps kubelet creates. Cleanup leaves them.
var kubeletJumpRules = []jumpRule{
	{utiliptables.TableFilter, kubeletFirewallChain, utiliptables.ChainInput, "", nil},
	{utiliptables.TableFilter, kubeletFirewallChain, utiliptables.ChainOutput, "", nil},
}

func (j jumpRule) args() []string {
	args := slices.Clone(j.extraArgs)
	if j.comment != "" {
		args = append(args, "-m", "comment", "--comment", j.comment)
	}
	return append(args, "-j", string(j.dstChain))
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
// the builtin chains.
//
// The current rules are read first (two iptables-save runs, whose nat
// output the leftover scan reuses), so a full sync of a node that has them
// makes no further call. What is missing goes in one iptables-restore: on a
// cold start that is all 14 jumps, which as Ensure calls were 42 iptables
// executions, about 100 ms of a 1k-Service first sync on iptables-legacy.
// The restore creates chains with "-N", which fails if the chain appeared
// since the save; then, as when the save failed, each jump is ensured on
// its own, and EnsureRule checks exactly. A rule is never skipped unless a
// rule with the same target, comment and ctstate is present.
func (s *syncer) ensureJumpRules() error {
	present := map[utiliptables.Table]*tableState{}
	for _, table := range [...]utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
		var buf bytes.Buffer
		if err := s.ipt.SaveInto(table, &buf); err != nil {
			s.logger.V(2).Info("iptables-save failed, ensuring every jump rule", "table", table, "err", err)
			present = nil
			break
		}
		if table == utiliptables.TableNAT {
			s.saveBuf.Reset()
			s.saveBuf.Write(buf.Bytes())
			s.natSaved = true
		}
		present[table] = parseTableState(buf.Bytes())
	}
	var missing []jumpRule
	for _, j := range append(slices.Clip(jumpRules), kubeletJumpRules...) {
		if st := present[j.table]; st == nil || !st.chains.Has(j.dstChain) || !st.hasJump(j) {
			missing = append(missing, j)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if one, ok := s.ipt.(oneByOneEnsurer); ok {
		return one.ensureJumps(missing)
	}
	if present == nil {
		return ensureEach{s.ipt}.ensureJumps(missing)
	}
	err := s.ipt.RestoreAll(jumpRestoreInput(missing, present), utiliptables.NoFlushTables, utiliptables.NoRestoreCounters)
	if err == nil {
		return nil
	}
	s.logger.V(2).Info("Adding the missing jump rules in one restore failed, ensuring them one by one", "err", err)
	return ensureEach{s.ipt}.ensureJumps(missing)
}

// oneByOneEnsurer is implemented by an Interface that wants the jumps as
// EnsureChain and EnsureRule calls rather than as a restore: the dry run
// prints each call as the "# ensure:" line `kube-proxy trace` reads.
type oneByOneEnsurer interface {
	ensureJumps([]jumpRule) error
}

// ensureEach ensures jumps with one EnsureChain and one EnsureRule each.
type ensureEach struct{ ipt utiliptables.Interface }

func (e ensureEach) ensureJumps(jumps []jumpRule) error {
	for _, j := range jumps {
		if _, err := e.ipt.EnsureChain(j.table, j.dstChain); err != nil {
			return fmt.Errorf("ensuring chain %s/%s: %w", j.table, j.dstChain, err)
		}
		if _, err := e.ipt.EnsureRule(utiliptables.Prepend, j.table, j.srcChain, j.args()...); err != nil {
			return fmt.Errorf("ensuring jump %s/%s -> %s: %w", j.table, j.srcChain, j.dstChain, err)
		}
	}
	return nil
}

// jumpRestoreInput is the iptables-restore input (for --noflush) that adds
// the missing jumps, creating the chains the saved tables lack. Each jump is
// inserted at the top, in list order, as EnsureRule(Prepend) would.
func jumpRestoreInput(missing []jumpRule, present map[utiliptables.Table]*tableState) []byte {
	var b bytes.Buffer
	for _, table := range [...]utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
		created := sets.New[utiliptables.Chain]()
		wrote := false
		for _, j := range missing {
			if j.table != table {
				continue
			}
			if !wrote {
				fmt.Fprintf(&b, "*%s\n", table)
				wrote = true
			}
			if !present[table].chains.Has(j.dstChain) && !created.Has(j.dstChain) {
				fmt.Fprintf(&b, "-N %s\n", j.dstChain)
				created.Insert(j.dstChain)
			}
			fmt.Fprintf(&b, "-I %s %s\n", j.srcChain, quoteArgs(j.args()))
		}
		if wrote {
			b.WriteString("COMMIT\n")
		}
	}
	return b.Bytes()
}

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

// tableState is what ensureJumpRules needs to know of a saved table.
type tableState struct {
	chains sets.Set[utiliptables.Chain]
	// rules of builtin chains, split into words
	rules map[utiliptables.Chain][][]string
}

func parseTableState(save []byte) *tableState {
	st := &tableState{chains: utiliptables.GetChainsFromTable(save), rules: map[utiliptables.Chain][][]string{}}
	for _, line := range bytes.Split(save, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("-A ")) {
			continue
		}
		words := splitRuleWords(string(line))
		if len(words) < 2 {
			continue
		}
		switch c := utiliptables.Chain(words[1]); c {
		case utiliptables.ChainInput, utiliptables.ChainOutput, utiliptables.ChainForward, utiliptables.ChainPrerouting, utiliptables.ChainPostrouting:
			st.rules[c] = append(st.rules[c], words[2:])
		}
	}
	return st
}

// hasJump reports whether the source chain has a rule jumping to j's
// target with j's comment and ctstate match.
func (st *tableState) hasJump(j jumpRule) bool {
	for _, w := range st.rules[j.srcChain] {
		if wordAfter(w, "-j") != string(j.dstChain) {
			continue
		}
		if j.comment != "" && wordAfter(w, "--comment") != j.comment {
			continue
		}
		if ct := wordAfter(j.extraArgs, "--ctstate"); ct != "" && (wordAfter(w, "--ctstate") != ct || slices.Contains(w, "!")) {
			continue
		}
		return true
	}
	return false
}

func wordAfter(words []string, flag string) string {
	for i := 0; i+1 < len(words); i++ {
		if words[i] == flag {
			return words[i+1]
		}
	}
	return ""
}

// splitRuleWords splits an iptables-save line into words, removing the
// double quotes around words that contain spaces.
func splitRuleWords(line string) []string {
	var words []string
	var cur []byte
	inQuote, inWord := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '"':
			inQuote, inWord = !inQuote, true
		case c == '\\' && inQuote && i+1 < len(line):
			i++
			cur = append(cur, line[i])
		case (c == ' ' || c == '\t') && !inQuote:
			if inWord {
				words = append(words, string(cur))
				cur, inWord = cur[:0], false
			}
		default:
			cur, inWord = append(cur, c), true
		}
	}
	if inWord {
		words = append(words, string(cur))
	}
	return words
}
