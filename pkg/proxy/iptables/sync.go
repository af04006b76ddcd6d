package iptables

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	utiliptables "k8s.io/net-utils/iptables"
)

// bytesBuffer is bytes.Buffer under a name that reads well in struct fields.
type bytesBuffer = bytes.Buffer

type jumpRule struct {
	table     utiliptables.Table
	dstChain  utiliptables.Chain
	srcChain  utiliptables.Chain
	comment   string
	extraArgs []string
}

// jumpRules are the rules in builtin chains leading to ours. They are
// ensured with individual iptables calls on full syncs, because a restore
// can only replace a builtin chain wholesale, and other software owns rules
// there too.
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

// svcRender is what one service port contributed to the last sync.
type svcRender struct {
	info *servicePortInfo

	// filter holds the port's rules in the top-level filter chains and
	// dispatch its rules in the top-level nat chains (KUBE-SERVICES,
	// KUBE-NODEPORTS); both are rewritten on every sync.
	filter, dispatch ruleBuf
	// chains are the port's own nat chains; ownRules counts their rules,
	// which are written only when the port changed.
	chains   []utiliptables.Chain
	ownRules int
}

var errSyncFailed = errors.New("iptables sync failed")

// rulesBackend is the Proxier seen as the Shell's backend. It is a separate
// type so that its Sync does not clash with Provider's Sync.
type rulesBackend Proxier

var (
	_ syncshell.Backend   = &rulesBackend{}
	_ syncshell.Validator = &rulesBackend{}
)

// Sync implements syncshell.Backend; see syncProxyRules.
func (b *rulesBackend) Sync(_ context.Context, u *syncshell.Update) (syncshell.Outcome, error) {
	return (*Proxier)(b).syncProxyRules(u)
}

// ValidServicePort leaves out service ports no rule can be written for.
func (b *rulesBackend) ValidServicePort(name proxy.ServicePortName, svc proxy.ServicePort) bool {
	info, ok := svc.(*servicePortInfo)
	switch {
	case !ok:
		b.logger.Error(nil, "Skipping service port of unexpected type", "servicePortName", name, "type", fmt.Sprintf("%T", svc))
	case info.invalid != "":
		b.logger.Error(nil, "Skipping service port with invalid data", "servicePortName", name.String(), "reason", info.invalid)
	default:
		return true
	}
	return false
}

// ValidEndpoint leaves out endpoints no rule can be written for.
func (b *rulesBackend) ValidEndpoint(name proxy.ServicePortName, ep proxy.Endpoint) bool {
	e, ok := ep.(*endpointInfo)
	switch {
	case !ok:
		b.logger.Error(nil, "Skipping endpoint of unexpected type", "servicePortName", name.String(), "endpoint", ep.String(), "type", fmt.Sprintf("%T", ep))
	case e.invalid != "":
		b.logger.Error(nil, "Skipping endpoint with invalid data", "servicePortName", name.String(), "endpoint", ep.String(), "reason", e.invalid)
	default:
		return true
	}
	return false
}

// syncProxyRules is the only place rules are written (apart from cleanup).
func (p *Proxier) syncProxyRules(u *syncshell.Update) (out syncshell.Outcome, retErr error) {
	p.natSaved = false
	doFullSync := u.Full
	family := string(p.ipFamily)
	if u.ServicesChanged || len(p.order) != len(u.Services) {
		p.orderDirty = true
	}

	totalEndpoints := 0
	for name := range u.Services {
		totalEndpoints += len(u.Endpoints[name])
	}
	large := totalEndpoints > largeClusterEndpointsThreshold
	if large != p.largeClusterMode {
		// Comments differ between the modes, so cached renders are stale.
		p.largeClusterMode = large
		doFullSync = true
	}

	p.logger.V(2).Info("Syncing iptables rules", "fullSync", doFullSync)

	success := false
	defer func() {
		out.Full = doFullSync && !u.Full
		out.Programmed = success
		out.NoPeriodicFullSync = p.largeClusterMode
		if success {
			return
		}
		p.logger.Info("Sync failed", "retryingTime", p.syncPeriod)
		retErr = errSyncFailed
		if !doFullSync {
			metrics.IPTablesPartialRestoreFailuresTotal.WithLabelValues(family).Inc()
		}
		// The trackers have been drained, so what changed is lost: only a
		// full sync can bring the kernel back in line.
		p.appliedValid = false
	}()

	if doFullSync {
		if err := p.ensureJumpRules(); err != nil {
			p.logger.Error(err, "Failed to ensure jump rules from builtin chains")
			return out, errSyncFailed
		}
		if p.nfacct != nil {
			for name := range p.nfacctReady {
				if err := p.nfacct.Ensure(name); err != nil {
					p.nfacctReady[name] = false
					p.logger.Error(err, "Failed to create nfacct counter; the corresponding metric will not be updated", "counter", name)
				} else {
					p.nfacctReady[name] = true
				}
			}
		}
	}

	// Chains that exist but are no longer wanted are those of removed
	// service ports and (below) those a re-rendered port dropped. They are
	// queued in p.pendingStale with their owner. Chain names embed a hash
	// of the service port, so no two ports share a chain and per-port
	// bookkeeping is exact.
	var stale []utiliptables.Chain
	if p.orderDirty {
		p.order = p.order[:0]
		for name := range u.Services {
			p.order = append(p.order, name)
		}
		slices.SortFunc(p.order, compareServicePortName)
		p.orderDirty = false
		for name, r := range p.cache {
			if _, ok := u.Services[name]; !ok {
				for _, c := range r.chains {
					p.pendingStale[c] = name
				}
				delete(p.cache, name)
			}
		}
	}

	p.filterChains.reset()
	p.filterRules.reset()
	p.natChains.reset()
	p.natRules.reset()
	p.dispatch.reset()

	for _, c := range [...]utiliptables.Chain{kubeServicesChain, kubeExternalServicesChain, kubeForwardChain, kubeNodePortsChain, kubeProxyFirewallChain} {
		p.filterChains.chainLine(c)
	}
	for _, c := range [...]utiliptables.Chain{kubeServicesChain, kubeNodePortsChain, kubePostroutingChain, kubeMarkMasqChain} {
		p.natChains.chainLine(c)
	}

	// Packets marked by KUBE-MARK-MASQ are masqueraded on the way out; the
	// mark is cleared first so a packet re-entering the stack is not
	// masqueraded twice.
	p.natRules.line("-A", string(kubePostroutingChain), "-m", "mark", "!", "--mark", p.masqueradeMatch, "-j", "RETURN")
	p.natRules.line("-A", string(kubePostroutingChain), "-j", "MARK", "--xor-mark", p.masqueradeMark)
	p.natRules.start("-A", string(kubePostroutingChain), "-m", "comment", "--comment", `"kubernetes service traffic requiring SNAT"`, "-j", "MASQUERADE")
	if p.randomFully {
		p.natRules.more("--random-fully")
	}
	p.natRules.end()
	p.natRules.line("-A", string(kubeMarkMasqChain), "-j", "MARK", "--or-mark", p.masqueradeMark)
	// Everything so far in nat is fixed for the proxier's lifetime; the
	// per-service chains follow.
	natTopChainsEnd, natTopRulesEnd, natTopRules := len(p.natChains.b), len(p.natRules.b), p.natRules.lines

	isIPv6 := p.ipFamily == v1.IPv6Protocol
	if !isIPv6 && p.localhostNodePorts {
		// route_localnet lets remote hosts reach 127.0.0.0/8 on this node
		// (https://issue.k8s.io/90259); only DNATed replies may use it. The
		// same rule is created by kubelet and must stay identical to it.
		p.filterChains.chainLine(kubeletFirewallChain)
		p.filterRules.line("-A", string(kubeletFirewallChain), "-m", "comment", "--comment", `"block incoming localnet connections"`,
			"-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP")
	}

	skippedRules := 0
	for _, name := range p.order {
		svc, ok := u.Services[name]
		if !ok {
			continue
		}
		info, _ := svc.(*servicePortInfo) // nil when ValidServicePort refused it
		changed := doFullSync || u.Changed(name.NamespacedName)
		r := p.cache[name]
		if changed || r == nil || r.info != info {
			if r == nil {
				r = &svcRender{}
				p.cache[name] = r
			}
			prev := append(p.prevChains[:0], r.chains...)
			p.renderService(r, info, u.Policy(name), true)
			for _, c := range prev {
				if !slices.Contains(r.chains, c) {
					p.pendingStale[c] = name
				}
			}
			p.prevChains = prev
		} else {
			skippedRules += r.ownRules
		}
		p.filterRules.appendBuf(&r.filter)
		p.dispatch.appendBuf(&r.dispatch)
	}

	// Large clusters delete stale chains at most once per syncPeriod, as
	// upstream does: deletions are restore input too, and an unreferenced
	// chain is harmless meanwhile. A queued chain that is in use again
	// (an endpoint came back) is of course kept.
	if doFullSync || !p.largeClusterMode || time.Since(p.lastStaleCleanup) >= p.syncPeriod {
		for c, owner := range p.pendingStale {
			if r := p.cache[owner]; r != nil && slices.Contains(r.chains, c) {
				continue
			}
			stale = append(stale, c)
		}
		clear(p.pendingStale)
		p.lastStaleCleanup = time.Now()
	}

	// A full sync also asks the kernel which of our chains exist, to catch
	// leftovers of an earlier process or of a failed sync. Partial syncs
	// never need iptables-save.
	if doFullSync {
		var err error
		if !p.natSaved {
			p.saveBuf.Reset()
			err = p.iptables.SaveInto(utiliptables.TableNAT, &p.saveBuf)
		}
		p.natSaved = false
		if err != nil {
			p.logger.Error(err, "Failed to execute iptables-save: stale chains will not be deleted")
		} else {
			existing := utiliptables.GetChainsFromTable(p.saveBuf.Bytes())
			for _, r := range p.cache {
				existing.Delete(r.chains...)
			}
			for c := range existing {
				if isServiceChainName(string(c)) {
					stale = append(stale, c)
				}
			}
		}
	}
	slices.Sort(stale)
	stale = slices.Compact(stale)
	for _, c := range stale {
		p.natChains.chainLine(c)
	}

	// The jump to KUBE-NODEPORTS must be the last rule of KUBE-SERVICES, so
	// that service IPs which are also node IPs match their own rules first.
	if p.nodePortAddresses.MatchAll() {
		p.dispatch.start("-A", string(kubeServicesChain), "-m", "comment", "--comment", `"kubernetes service nodeports; NOTE: this must be the last rule in this chain"`,
			"-m", "addrtype", "--dst-type", "LOCAL")
		// Loopback NodePorts never work for IPv6 and for IPv4 only with
		// route_localnet.
		if isIPv6 {
			p.dispatch.more("!", "-d", "::1/128")
		} else if !p.localhostNodePorts {
			p.dispatch.more("!", "-d", "127.0.0.0/8")
		}
		p.dispatch.more("-j", string(kubeNodePortsChain))
		p.dispatch.end()
	} else {
		nodeIPs, err := p.nodePortAddresses.GetNodeIPs(p.networkInterfacer)
		if err != nil {
			p.logger.Error(err, "Failed to get node ip address matching nodeport cidrs, services with nodeport may not work as intended", "CIDRs", p.nodePortAddresses)
		}
		for _, ip := range nodeIPs {
			if ip.IsLoopback() {
				if isIPv6 {
					p.logger.Error(nil, "--nodeport-addresses includes localhost but localhost NodePorts are not supported on IPv6", "address", ip.String())
					continue
				} else if !p.localhostNodePorts {
					p.logger.Error(nil, "--nodeport-addresses includes localhost but --iptables-localhost-nodeports=false was passed", "address", ip.String())
					continue
				}
			}
			p.dispatch.line("-A", string(kubeServicesChain), "-m", "comment", "--comment", `"kubernetes service nodeports; NOTE: this must be the last rule in this chain"`,
				"-d", ip.String(), "-j", string(kubeNodePortsChain))
		}
	}

	// Without be_liberal, conntrack may declare packets of a healthy
	// connection INVALID; forwarded, they would reach the endpoint un-DNATed
	// and be answered with a RST (issues 74839, 117924).
	if !p.conntrackTCPLiberal {
		p.filterRules.start("-A", string(kubeForwardChain), "-m", "conntrack", "--ctstate", "INVALID")
		if p.nfacctReady[metrics.IPTablesCTStateInvalidDroppedNFAcctCounter] {
			p.filterRules.more("-m", "nfacct", "--nfacct-name", metrics.IPTablesCTStateInvalidDroppedNFAcctCounter)
		}
		p.filterRules.more("-j", "DROP")
		p.filterRules.end()
	}
	// Accept what we marked for masquerading, so NodePort traffic is
	// forwarded even under a DROP FORWARD policy, and its replies.
	p.filterRules.line("-A", string(kubeForwardChain), "-m", "comment", "--comment", `"kubernetes forwarding rules"`,
		"-m", "mark", "--mark", p.masqueradeMatch, "-j", "ACCEPT")
	p.filterRules.line("-A", string(kubeForwardChain), "-m", "comment", "--comment", `"kubernetes forwarding conntrack rule"`,
		"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")

	// A partial sync leaves out the top-level chains when they would be
	// rewritten with exactly what the last successful restore put there:
	// an endpoint change then costs iptables-restore the changed service's
	// chains only, not every service's dispatch rules. (--noflush restores
	// leave undeclared chains alone.) Upstream rewrites them on every sync,
	// which also repairs them if someone flushed one but left the canary;
	// to keep that repair within a syncPeriod of the next change, they are
	// written at least once per syncPeriod anyway, and on every full sync.
	writeAllTop := doFullSync || !p.appliedValid || time.Since(p.lastTopLevelWrite) >= p.syncPeriod
	writeFilter := writeAllTop ||
		!bytes.Equal(p.filterChains.b, p.appliedFilterChains.b) || !bytes.Equal(p.filterRules.b, p.appliedFilterRules.b)
	writeNATTop := writeAllTop || !bytes.Equal(p.dispatch.b, p.appliedDispatch.b)

	natLines := p.natRules.lines + p.dispatch.lines
	natWritten := natLines
	if !writeNATTop {
		natWritten -= natTopRules + p.dispatch.lines
	}
	filterWritten := p.filterRules.lines
	if !writeFilter {
		filterWritten = 0
	}
	metrics.IPTablesRulesTotal.WithLabelValues(string(utiliptables.TableFilter), family).Set(float64(p.filterRules.lines))
	metrics.IPTablesRulesLastSync.WithLabelValues(string(utiliptables.TableFilter), family).Set(float64(filterWritten))
	metrics.IPTablesRulesTotal.WithLabelValues(string(utiliptables.TableNAT), family).Set(float64(natLines + skippedRules))
	metrics.IPTablesRulesLastSync.WithLabelValues(string(utiliptables.TableNAT), family).Set(float64(natWritten))

	data := p.restoreData[:0]
	if writeFilter {
		data = append(data, "*filter\n"...)
		data = append(data, p.filterChains.b...)
		data = append(data, p.filterRules.b...)
		data = append(data, "COMMIT\n"...)
	}
	data = append(data, "*nat\n"...)
	if writeNATTop {
		data = append(data, p.natChains.b...)
		data = append(data, p.natRules.b...)
		data = append(data, p.dispatch.b...)
	} else {
		data = append(data, p.natChains.b[natTopChainsEnd:]...)
		data = append(data, p.natRules.b[natTopRulesEnd:]...)
	}
	for _, c := range stale {
		data = append(data, "-X "...)
		data = append(data, c...)
		data = append(data, '\n')
	}
	data = append(data, "COMMIT\n"...)
	p.restoreData = data

	p.logger.V(2).Info("Reloading service iptables data",
		"numServices", len(u.Services),
		"numEndpoints", totalEndpoints,
		"numFilterChains", p.filterChains.lines,
		"numFilterRules", p.filterRules.lines,
		"numNATChains", p.natChains.lines,
		"numNATRules", natLines,
	)
	p.logger.V(9).Info("Restoring iptables", "rules", data)

	if err := p.iptables.RestoreAll(data, utiliptables.NoFlushTables, utiliptables.RestoreCounters); err != nil {
		var pErr utiliptables.ParseError
		if errors.As(err, &pErr) {
			lines := utiliptables.ExtractLines(data, pErr.Line(), 3)
			p.logger.Error(pErr, "Failed to execute iptables-restore", "rules", lines)
		} else {
			p.logger.Error(err, "Failed to execute iptables-restore")
		}
		metrics.IPTablesRestoreFailuresTotal.WithLabelValues(family).Inc()
		return out, errSyncFailed
	}
	success = true
	// Keep what the kernel now has in the top-level chains; the buffers are
	// swapped rather than copied, and the next sync resets the old ones.
	if writeFilter {
		p.filterChains, p.appliedFilterChains = p.appliedFilterChains, p.filterChains
		p.filterRules, p.appliedFilterRules = p.appliedFilterRules, p.filterRules
	}
	if writeNATTop {
		p.dispatch, p.appliedDispatch = p.appliedDispatch, p.dispatch
	}
	p.appliedValid = true
	if writeFilter && writeNATTop {
		p.lastTopLevelWrite = time.Now()
	}

	return out, nil
}

func compareServicePortName(a, b proxy.ServicePortName) int {
	return cmp.Or(
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Name, b.Name),
		strings.Compare(a.Port, b.Port),
		strings.Compare(string(a.Protocol), string(b.Protocol)),
	)
}

// ensureJumpRules creates our top-level chains and the jumps to them from
// the builtin chains. Requires p.mu.
//
// Each Ensure* is one or two iptables executions, ~30 per full sync. So the
// current rules are read first (two iptables-save runs, whose nat output the
// stale-chain scan reuses) and only what looks missing is ensured. A rule
// that only looks missing costs an EnsureRule, which checks exactly; a
// rule is never skipped unless a rule with the same target, comment and
// ctstate is present.
func (p *Proxier) ensureJumpRules() error {
	present := map[utiliptables.Table]*tableState{}
	for _, table := range [...]utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
		var buf bytes.Buffer
		if err := p.iptables.SaveInto(table, &buf); err != nil {
			p.logger.V(2).Info("iptables-save failed, ensuring every jump rule", "table", table, "err", err)
			present = nil
			break
		}
		if table == utiliptables.TableNAT {
			p.saveBuf.Reset()
			p.saveBuf.Write(buf.Bytes())
			p.natSaved = true
		}
		present[table] = parseTableState(buf.Bytes())
	}
	for _, j := range append(slices.Clip(jumpRules), kubeletJumpRules...) {
		if st := present[j.table]; st != nil && st.chains.Has(j.dstChain) && st.hasJump(j) {
			continue
		}
		if _, err := p.iptables.EnsureChain(j.table, j.dstChain); err != nil {
			return fmt.Errorf("ensuring chain %s/%s: %w", j.table, j.dstChain, err)
		}
		if _, err := p.iptables.EnsureRule(utiliptables.Prepend, j.table, j.srcChain, j.args()...); err != nil {
			return fmt.Errorf("ensuring jump %s/%s -> %s: %w", j.table, j.srcChain, j.dstChain, err)
		}
	}
	return nil
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

// renderService computes r from scratch for one service port. The port's
// own chains are written to p.natChains/p.natRules; its rules in top-level
// chains go to r.filter and r.dispatch. Requires p.mu.
func (p *Proxier) renderService(r *svcRender, info *servicePortInfo, tp *proxy.TrafficPolicy, writeOwn bool) {
	r.info = info
	r.filter.reset()
	r.dispatch.reset()
	r.chains = r.chains[:0]
	r.ownRules = 0
	if info == nil || tp == nil {
		// Not programmable (ValidServicePort said why): no rules, and the
		// chains it had become stale.
		return
	}

	clusterEndpoints, localEndpoints, reachable, hasEndpoints := tp.ClusterEndpoints, tp.LocalEndpoints, tp.ReachableEndpoints, tp.HasEndpoints

	proto := info.protocol
	clusterPolicyChain := info.clusterPolicyChain
	localPolicyChain := info.localPolicyChain
	usesClusterPolicyChain := tp.UsesClusterEndpoints
	usesLocalPolicyChain := tp.UsesLocalEndpoints

	internalChain := clusterPolicyChain
	if tp.InternalLocal {
		internalChain = localPolicyChain
	}
	externalPolicyChain := clusterPolicyChain
	if tp.ExternalLocal {
		externalPolicyChain = localPolicyChain
	}
	hasInternalEndpoints := tp.Internal == proxy.Forward
	hasExternalEndpoints := tp.External == proxy.Forward
	extChain := info.externalChain
	// The EXT chain is needed whenever anything is reachable, even with no
	// externally usable endpoints: it short-circuits pod and host traffic.
	usesExtChain := hasEndpoints && info.ExternallyAccessible()
	lbVIPs := info.LoadBalancerVIPs()
	lbChain := extChain
	usesFWChain := hasEndpoints && len(lbVIPs) > 0 && len(info.LoadBalancerSourceRanges()) > 0
	if usesFWChain {
		lbChain = info.firewallChain
	}

	// With no endpoints at all the filter table rejects, so clients fail
	// fast instead of timing out; with endpoints only elsewhere it drops.
	internalFilterTarget, internalFilterComment := info.filterVerdict(tp.Internal)
	externalFilterTarget, externalFilterComment := info.filterVerdict(tp.External)

	d, f := &r.dispatch, &r.filter

	// Cluster IP.
	if hasInternalEndpoints {
		d.line("-A", string(kubeServicesChain), "-m", "comment", "--comment", info.commentClusterIP,
			"-m", proto, "-p", proto, "-d", info.clusterIP, "--dport", info.port, "-j", string(internalChain))
	} else {
		f.line("-A", string(kubeServicesChain), "-m", "comment", "--comment", internalFilterComment,
			"-m", proto, "-p", proto, "-d", info.clusterIP, "--dport", info.port, "-j", internalFilterTarget)
	}

	// External IPs.
	for _, ip := range info.ExternalIPs() {
		ips := ip.String()
		if hasEndpoints {
			d.line("-A", string(kubeServicesChain), "-m", "comment", "--comment", info.commentExternalIP,
				"-m", proto, "-p", proto, "-d", ips, "--dport", info.port, "-j", string(extChain))
		}
		if !hasExternalEndpoints {
			// Traffic the EXT chain did not short-circuit ends here.
			f.line("-A", string(kubeExternalServicesChain), "-m", "comment", "--comment", externalFilterComment,
				"-m", proto, "-p", proto, "-d", ips, "--dport", info.port, "-j", externalFilterTarget)
		}
	}

	// Load-balancer ingress IPs.
	for _, ip := range lbVIPs {
		ips := ip.String()
		if hasEndpoints {
			d.line("-A", string(kubeServicesChain), "-m", "comment", "--comment", info.commentLBIP,
				"-m", proto, "-p", proto, "-d", ips, "--dport", info.port, "-j", string(lbChain))
		}
		if usesFWChain {
			f.line("-A", string(kubeProxyFirewallChain), "-m", "comment", "--comment", info.commentFWDrop,
				"-m", proto, "-p", proto, "-d", ips, "--dport", info.port, "-j", "DROP")
		}
	}
	if !hasExternalEndpoints {
		for _, ip := range lbVIPs {
			f.line("-A", string(kubeExternalServicesChain), "-m", "comment", "--comment", externalFilterComment,
				"-m", proto, "-p", proto, "-d", ip.String(), "--dport", info.port, "-j", externalFilterTarget)
		}
	}

	// NodePort. loadBalancerSourceRanges do not apply to it, as upstream.
	if info.NodePort() != 0 {
		if hasEndpoints {
			if p.localhostNodePorts && p.ipFamily == v1.IPv4Protocol && p.nfacctReady[metrics.LocalhostNodePortAcceptedNFAcctCounter] {
				d.line("-A", string(kubeNodePortsChain), "-m", "comment", "--comment", info.nameString,
					"-m", proto, "-p", proto, "-d", "127.0.0.0/8", "--dport", info.nodePort,
					"-m", "nfacct", "--nfacct-name", metrics.LocalhostNodePortAcceptedNFAcctCounter, "-j", string(extChain))
			}
			d.line("-A", string(kubeNodePortsChain), "-m", "comment", "--comment", info.nameString,
				"-m", proto, "-p", proto, "--dport", info.nodePort, "-j", string(extChain))
		}
		if !hasExternalEndpoints {
			f.line("-A", string(kubeExternalServicesChain), "-m", "comment", "--comment", externalFilterComment,
				"-m", "addrtype", "--dst-type", "LOCAL", "-m", proto, "-p", proto, "--dport", info.nodePort, "-j", externalFilterTarget)
		}
	}

	// Health check node port: accepted whether or not there are local
	// endpoints, since answering "no" is the point.
	if info.HealthCheckNodePort() != 0 {
		f.line("-A", string(kubeNodePortsChain), "-m", "comment", "--comment", info.commentHC,
			"-m", "tcp", "-p", "tcp", "--dport", info.hcNodePort, "-j", "ACCEPT")
	}

	// From here on: the port's own chains.
	nc, nr := &p.natChains, &p.natRules
	var discardChains, discardRules ruleBuf
	if !writeOwn {
		nc, nr = &discardChains, &discardRules
	}
	rulesBefore := nr.lines

	if hasInternalEndpoints {
		if p.masqueradeAll {
			nr.line("-A", string(internalChain), "-m", "comment", "--comment", info.commentClusterIP,
				"-m", proto, "-p", proto, "-d", info.clusterIP, "--dport", info.port, "-j", string(kubeMarkMasqChain))
		} else if p.localDetector.IsImplemented() {
			// Off-cluster clients routed to the service range via this node
			// may be answered from another node, so they are masqueraded.
			nr.start("-A", string(internalChain), "-m", "comment", "--comment", info.commentClusterIP,
				"-m", proto, "-p", proto, "-d", info.clusterIP, "--dport", info.port)
			nr.more(p.localDetector.IfNotLocal()...)
			nr.more("-j", string(kubeMarkMasqChain))
			nr.end()
		}
	}

	if usesExtChain {
		nc.chainLine(extChain)
		r.chains = append(r.chains, extChain)
		if !info.ExternalPolicyLocal() {
			// Endpoints may be on other nodes; replies must come back here.
			nr.line("-A", string(extChain), "-m", "comment", "--comment", info.commentMasqExt, "-j", string(kubeMarkMasqChain))
		} else {
			if p.localDetector.IsImplemented() {
				// Pods reaching an external address behave as if they went
				// out to the load balancer and came back: no traffic policy.
				nr.start("-A", string(extChain), "-m", "comment", "--comment", info.commentPodExt)
				nr.more(p.localDetector.IfLocal()...)
				nr.more("-j", string(clusterPolicyChain))
				nr.end()
			}
			// The host itself would use the (local) external IP as source,
			// which the endpoint cannot answer, so masquerade and use any
			// endpoint.
			nr.line("-A", string(extChain), "-m", "comment", "--comment", info.commentMasqLocal,
				"-m", "addrtype", "--src-type", "LOCAL", "-j", string(kubeMarkMasqChain))
			nr.line("-A", string(extChain), "-m", "comment", "--comment", info.commentRouteLocal,
				"-m", "addrtype", "--src-type", "LOCAL", "-j", string(clusterPolicyChain))
		}
		if hasExternalEndpoints {
			nr.line("-A", string(extChain), "-j", string(externalPolicyChain))
		}
	}

	if usesFWChain {
		fw := info.firewallChain
		nc.chainLine(fw)
		r.chains = append(r.chains, fw)
		allowFromNode := false
		for _, cidr := range info.LoadBalancerSourceRanges() {
			nr.line("-A", string(fw), "-m", "comment", "--comment", info.commentLBIP, "-s", cidr.String(), "-j", string(extChain))
			if p.nodeIP != nil && cidr.Contains(p.nodeIP) {
				allowFromNode = true
			}
		}
		// A VIP routed locally makes the node's own requests arrive with
		// the VIP as source; allow them if the node is allowed.
		if allowFromNode {
			for _, ip := range lbVIPs {
				nr.line("-A", string(fw), "-m", "comment", "--comment", info.commentLBIP, "-s", ip.String(), "-j", string(extChain))
			}
		}
		// Falling off the end leaves the packet un-DNATed, and
		// KUBE-PROXY-FIREWALL drops it. The rule only makes that visible.
		nr.line("-A", string(fw), "-m", "comment", "--comment", info.commentFWOther)
	}

	if usesClusterPolicyChain {
		nc.chainLine(clusterPolicyChain)
		r.chains = append(r.chains, clusterPolicyChain)
		p.writeDispatchRules(nr, info, clusterPolicyChain, clusterEndpoints)
	}
	if usesLocalPolicyChain {
		nc.chainLine(localPolicyChain)
		r.chains = append(r.chains, localPolicyChain)
		p.writeDispatchRules(nr, info, localPolicyChain, localEndpoints)
	}

	affinity := info.SessionAffinityType() == v1.ServiceAffinityClientIP
	for _, ep := range reachable {
		epInfo := ep.(*endpointInfo) // usableEndpoints guarantees the type
		c := epInfo.chainName
		nc.chainLine(c)
		r.chains = append(r.chains, c)
		// Hairpin: an endpoint reaching itself through the service must be
		// masqueraded or it would answer itself directly.
		nr.start("-A", string(c))
		if !p.largeClusterMode {
			nr.more("-m", "comment", "--comment", info.nameString)
		}
		nr.more("-s", epInfo.IP(), "-j", string(kubeMarkMasqChain))
		nr.end()
		nr.start("-A", string(c))
		if !p.largeClusterMode {
			nr.more("-m", "comment", "--comment", info.nameString)
		}
		if affinity {
			nr.more("-m", "recent", "--name", string(c), "--set")
		}
		nr.more("-m", proto, "-p", proto, "-j", "DNAT", "--to-destination", epInfo.String())
		nr.end()
	}
	r.ownRules = nr.lines - rulesBefore
}

// writeDispatchRules fills a SVC or SVL chain: first the affinity checks,
// then a cascade of random matches giving each endpoint an equal share.
func (p *Proxier) writeDispatchRules(nr *ruleBuf, info *servicePortInfo, chain utiliptables.Chain, endpoints []proxy.Endpoint) {
	if info.SessionAffinityType() == v1.ServiceAffinityClientIP {
		seconds := fmt.Sprint(info.StickyMaxAgeSeconds())
		for _, ep := range endpoints {
			epInfo := ep.(*endpointInfo)
			nr.start("-A", string(chain))
			if !p.largeClusterMode {
				nr.more("-m", "comment", "--comment", epInfo.comment)
			}
			nr.more("-m", "recent", "--name", string(epInfo.chainName), "--rcheck", "--seconds", seconds, "--reap", "-j", string(epInfo.chainName))
			nr.end()
		}
	}
	n := len(endpoints)
	for i, ep := range endpoints {
		epInfo := ep.(*endpointInfo)
		nr.start("-A", string(chain))
		if !p.largeClusterMode {
			nr.more("-m", "comment", "--comment", epInfo.comment)
		}
		if i < n-1 {
			nr.more("-m", "statistic", "--mode", "random", "--probability", p.probability(n-i))
		}
		nr.more("-j", string(epInfo.chainName))
		nr.end()
	}
}

// filterVerdict is the filter-table target and comment for traffic the
// resolved policy does not forward.
func (info *servicePortInfo) filterVerdict(a proxy.NoEndpointsAction) (target, comment string) {
	switch a {
	case proxy.Reject:
		return "REJECT", info.commentNoEndpoints
	case proxy.Drop:
		return "DROP", info.commentNoLocalEndpoints
	}
	return "", ""
}
