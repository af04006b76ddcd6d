//go:build linux

package nftables

import (
	"context"
	"fmt"
	"iter"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/proxy/metrics"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// DefaultMaxOpsPerTransaction bounds the size of one nft transaction. Above
// it, a sync is cut into several transactions at safe boundaries, so the
// nftables lock is held for a bounded time even on a cold start of a large
// cluster. Small syncs stay a single atomic transaction.
const DefaultMaxOpsPerTransaction = 20000

// syncer owns the kube-proxy table of one IP family: it turns service models
// into rules, diffs them against the in-memory view, and runs the result. It
// knows nothing about pkg/proxy's trackers, which keeps it testable on its own.
type syncer struct {
	syncerConfig
	nft knftables.Interface
	// elements, when set, applies plans made only of endpoint element
	// changes without nft (elements.go); nil sends everything through nft.
	elements elementWriter
	// elementFailures counts consecutive failed element writes; after
	// maxElementFailures the syncer stops using elements.
	elementFailures int
	// gen and view know the family's "ip"/"ip6" (ipX) and address type.
	gen  *generator
	view *view

	// serviceCIDRs is the comma-separated list of this family's ServiceCIDRs.
	serviceCIDRs string

	// driftState is what the drift check (drift.go) keeps.
	driftState driftState

	// recreatedBaseChains is set after the first full sync, which deletes and
	// recreates the base chains so that changed chain properties (priority)
	// can be applied.
	recreatedBaseChains bool

	logger         klog.Logger
	logRateLimiter *rate.Limiter
}

type syncerConfig struct {
	family            v1.IPFamily
	masqueradeBit     int
	masqueradeAll     bool
	localDetector     proxyutil.LocalTrafficDetector
	nodeIP            []byte
	nodePortAddresses *proxyutil.NodePortAddresses
	networkInterfacer proxyutil.NetworkInterfacer
	// rejectProtocols lists the protocols whose localhost NodePorts are
	// rejected (and counted); localhostEnabled says whether the map exists
	// at all (gate KubeProxyNFTablesLocalhostNodePorts).
	rejectProtocols  []v1.Protocol
	localhostEnabled bool
	// maxOps is the transaction size bound; <= 0 means unbounded.
	maxOps int
}

func newSyncer(nft knftables.Interface, cfg syncerConfig, logger klog.Logger) *syncer {
	ipX, addrType := "ip", "ipv4_addr"
	if cfg.family == v1.IPv6Protocol {
		ipX, addrType = "ip6", "ipv6_addr"
	}
	if cfg.localDetector == nil {
		cfg.localDetector = proxyutil.NewNoOpLocalDetector()
	}
	if cfg.networkInterfacer == nil {
		cfg.networkInterfacer = proxyutil.RealNetwork{}
	}
	mark := fmt.Sprintf("%#08x", 1<<uint(cfg.masqueradeBit))
	g := &generator{
		ipX:            ipX,
		addrType:       addrType,
		masqueradeMark: mark,
		masqueradeRule: "mark set mark or " + mark,
		nodeIP:         cfg.nodeIP,
		ruleBalanceMax: maxRuleBalancedEndpoints,
	}
	if cfg.localDetector.IsImplemented() {
		g.ifLocal = cfg.localDetector.IfLocalNFT()
	}
	return &syncer{
		driftState:     driftState{ledger: newGenLedger()},
		syncerConfig:   cfg,
		nft:            nft,
		gen:            g,
		view:           newView(ipX, addrType),
		logger:         logger,
		logRateLimiter: rate.NewLimiter(rate.Every(24*time.Hour), 1),
	}
}

// syncInput says what changed. On a full sync, services holds every service
// port; on a partial sync only the changed ones, and removed names the
// service ports that are gone. sync sets each services entry to nil once it
// has been turned into rules: on a cold start the models are a good part of
// the heap (~15 MiB at 10k Services x 10 endpoints), and the transactions
// that follow should not be rendered on top of them.
type syncInput struct {
	full     bool
	services []*serviceModel
	removed  []string
	// each, when set, yields more service ports after services and
	// removed: a model to program, or a nil model for an owner whose rules
	// go. The proxier builds each model only when sync asks for it, so a
	// full sync holds one model at a time instead of all of them while it
	// generates rules (at 10k Services x 10 endpoints, holding them all
	// raised the Go heap at its peak by ~20 MB, and the peak RSS with it).
	each iter.Seq2[string, *serviceModel]
	// rewriteClusterIPsCheck rewrites the cluster-ips-check chain on a
	// partial sync (the ServiceCIDRs changed).
	rewriteClusterIPsCheck bool
}

// syncResult reports what a sync did, for metrics and tests.
type syncResult struct {
	ops          int
	transactions int
}

// sync programs the kernel. With nothing to change it makes no kernel call.
func (s *syncer) sync(ctx context.Context, in syncInput) (syncResult, error) {
	pl := &plan{}
	// A full sync keeps its heap near what it holds live while it
	// generates, plans and applies (proxyutil.HeapPacer): at 10k Services
	// its peak RSS went from ~174 to ~127 MiB, at 50k from 915 to 470 MiB,
	// for ~15 ms per collection at 10k.
	var pacer *proxyutil.HeapPacer
	if in.full {
		pacer = proxyutil.NewHeapPacer()
		pl.pace = pacer.Pace
	}
	if in.full {
		s.setup(pl)
		s.view.resetDesired()
		enabled := [numContainers]bool{}
		for c := range numContainers {
			enabled[c] = c != cLocalhostReject || s.localhostEnabled
		}
		s.view.reload(ctx, s.nft, pl, enabled, s.logger)
	} else if in.rewriteClusterIPsCheck {
		pl.add(&knftables.Chain{Name: clusterIPsCheckChain})
		pl.flush(&knftables.Chain{Name: clusterIPsCheckChain})
		s.clusterIPsCheckRules(pl)
		pl.endUnit()
	}
	for i, svc := range in.services {
		s.view.setOwner(svc.owner, s.gen.build(svc, s.view))
		in.services[i] = nil
	}
	for _, owner := range in.removed {
		s.view.setOwner(owner, nil)
	}
	if in.each != nil {
		n := 0
		for owner, m := range in.each {
			if n++; pacer != nil && n%64 == 0 {
				pacer.Pace()
			}
			if m == nil {
				s.view.setOwner(owner, nil)
			} else {
				s.view.setOwner(m.owner, s.gen.build(m, s.view))
			}
		}
	}
	for _, c := range s.view.takeNewConflicts() {
		s.logger.Info("Service ports claim the same destination; the first in namespace/name/port order is programmed where only one can be",
			"destination", c.key, "servicePort", c.a, "conflictingServicePort", c.b)
	}
	s.view.netlinkOrder = s.elements != nil
	pend := s.view.diff(pl)
	if pl.empty() {
		return syncResult{}, nil
	}
	if in.full && s.view.tableAbsent && s.elements != nil {
		// A cold start: the netlink element units (the endpoint slots and
		// the dispatch maps) go after everything else, so nft runs once
		// and the elements follow in as few batches as fit. In the order
		// that is safe to cut, nft ran twice (maps, then chains and
		// rules), the second run listing the first's objects into its
		// cache: ~30 ms of a 1k-Service cold start.
		pl.moveUnitsLast(elementUnit)
	}
	res := syncResult{ops: pl.size}
	// A large full sync (cold start) leaves much garbage behind by now: the
	// trackers' rebuilt maps, the models, the replaced rules. Without a
	// collection here, rendering the transactions piles on top of it, and
	// the process peak grows with it (at 10k Services × 10 endpoints a
	// collection here cuts the real-kernel peak RSS from ~222 to ~209 MiB);
	// its cost is small next to such a sync and partial syncs never pay it.
	if in.full && s.maxOps > 0 && pl.size > s.maxOps {
		runtime.GC()
	}
	// What the fixed objects become, and the generation before the first
	// commit, for the drift check; taken before the plan is applied, which
	// may release its operations.
	fixed := s.driftState.fixedAfter(pl.ops, in.full)
	var written func(func(string))
	if !in.full { // a full sync forgets every chain's fingerprint anyway
		written = writtenChains(pl.ops)
	}
	genBefore, genOK := s.driftState.beforeWrite()
	if s.writeElements(ctx, pl) {
		res.transactions = 1
		s.view.commit(pend, time.Now())
		s.driftState.afterWrite(genBefore, genOK, res.transactions, in.full, &fixed, written)
		return res, nil
	}
	var err error
	if s.elements != nil && (in.full || pl.size > s.maxOps) {
		// Not one atomic transaction anyway: elements can go over netlink.
		res.transactions, err = s.applySegments(ctx, pl, pacer)
	} else {
		err = pl.each(s.nft, s.maxOps, func(tx *knftables.Transaction) error {
			res.transactions++
			return s.run(ctx, tx, strconv.Itoa(res.transactions))
		})
	}
	if err != nil {
		s.view.invalidate()
		s.driftState.writeFailed()
		return res, err
	}
	s.view.commit(pend, time.Now())
	s.driftState.afterWrite(genBefore, genOK, res.transactions, in.full, &fixed, written)
	return res, nil
}

// writtenChains yields the chains ops add, flush or delete, or add rules to.
func writtenChains(ops []op) func(func(string)) {
	var names []string
	for _, o := range ops {
		switch obj := o.obj.(type) {
		case *knftables.Chain:
			names = append(names, obj.Name)
		case *knftables.Rule:
			names = append(names, obj.Chain)
		}
	}
	return func(yield func(string)) {
		for _, name := range names {
			yield(name)
		}
	}
}

// run runs one nft transaction; which says which one, for the error.
func (s *syncer) run(ctx context.Context, tx *knftables.Transaction, which string) error {
	if v := s.logger.V(9); v.Enabled() {
		v.Info("Running nftables transaction", "transaction", tx.String())
	}
	if err := s.nft.Run(ctx, tx); err != nil {
		s.logFailure(tx)
		return fmt.Errorf("nftables transaction %s failed: %w", which, err)
	}
	return nil
}

// applySegments applies a plan that is cut into several transactions anyway
// (a full sync, or more than maxOps operations): element units over netlink
// in batches (see elementUnit), everything else through nft in transactions
// of at most maxOps, in plan order, so that every state in between is one
// that cutting the plan into transactions alone could produce. It returns
// how many transactions and batches it ran. pacer, if set, may collect
// between them: a transaction's rendered text and objects (~0.6 KB per
// operation) are garbage once nft has run.
func (s *syncer) applySegments(ctx context.Context, pl *plan, pacer *proxyutil.HeapPacer) (int, error) {
	n := 0
	err := pl.eachGroup(s.maxOps, elementUnit, func(ops []op, elements bool) error {
		if n++; n > 1 && pacer != nil {
			pacer.Pace()
		}
		if elements && s.writeOps(ctx, ops) {
			return nil
		}
		return s.run(ctx, transaction(s.nft, ops), strconv.Itoa(n))
	})
	return n, err
}

// maxElementFailures is how many element writes in a row may fail before the
// syncer sends everything through nft. One failure costs nothing but the
// netlink round trip, since the same plan then goes through nft; a writer
// that always fails (a kernel that refuses what nft would accept) should not
// cost that on every sync.
const maxElementFailures = 3

// writeElements applies pl with s.elements when it can, and reports whether
// it did. A plan it cannot or did not apply is left for nft, intact: the
// netlink batch is atomic, so a failed one changed nothing.
func (s *syncer) writeElements(ctx context.Context, pl *plan) bool {
	if s.elements == nil || pl.size > maxNetlinkElements || !pl.elementsOnly() {
		return false
	}
	return s.writeOps(ctx, pl.ops)
}

// writeOps applies element operations with s.elements and reports whether it
// did; after a failure the caller sends the same operations through nft.
func (s *syncer) writeOps(ctx context.Context, ops []op) bool {
	if s.elements == nil {
		return false
	}
	err := s.elements.writeElements(ctx, ops)
	if err == nil {
		s.elementFailures = 0
		if v := s.logger.V(9); v.Enabled() {
			v.Info("Wrote endpoint elements over netlink", "operations", len(ops))
		}
		return true
	}
	s.elementFailures++
	s.logger.Error(err, "Writing endpoint elements over netlink failed; running the same changes through nft", "failures", s.elementFailures)
	if s.elementFailures >= maxElementFailures {
		s.logger.Info("Element writes over netlink keep failing; sending every change through nft from now on")
		s.elements = nil
	}
	return false
}

// staleChainsPending reports whether flushed chains wait for deletion by
// deleteStaleChains.
func (s *syncer) staleChainsPending() bool { return len(s.view.stale) > 0 }

// masqueradeMark is the packet mark (hex) that asks for masquerading.
func (s *syncer) masqueradeMark() string { return s.gen.masqueradeMark }

// useInlineMaps makes the generator balance with upstream's anonymous map per
// chain instead of endpoint maps (see checkEndpointMaps). It takes effect for
// the rules built from then on; call it before the first sync.
func (s *syncer) useInlineMaps() { s.gen.inlineMaps = true }

// setServiceCIDRs sets this family's ServiceCIDRs, comma-separated, for the
// cluster-ips-check chain, and reports whether they changed. A full sync
// writes them; a partial one only with syncInput.rewriteClusterIPsCheck.
func (s *syncer) setServiceCIDRs(joined string) (changed bool) {
	if joined == s.serviceCIDRs {
		return false
	}
	s.serviceCIDRs = joined
	return true
}

// rejectsLocalhostNodePort reports whether localhost traffic to NodePorts of
// protocol is rejected (and counted) rather than served.
func (s *syncer) rejectsLocalhostNodePort(protocol v1.Protocol) bool {
	return slices.Contains(s.rejectProtocols, protocol)
}

// checkEndpointMaps asks nft, without changing anything, whether it can
// declare an endpoint map (slots.go): its "typeof numgen ..." key needs an
// nft that can describe numgen expressions in a set declaration.
func (s *syncer) checkEndpointMaps(ctx context.Context) error {
	tx := s.nft.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Map{Name: endpointMapPrefix + "capability-check", TypeOf: endpointMapTypeOf(s.gen.ipX, 0)})
	return s.nft.Check(ctx, tx)
}

// tableMissing reports whether our rules are gone from the kernel: the table
// was deleted, or flushed ("nft flush table" keeps chains, sets and maps but
// drops every rule). It lists the rules of one small base chain, which always
// holds the jump to the services chain once a full sync has run: a request for
// one named object fails with "not found" when the table or chain is gone (a
// dump of a whole object type may instead come back empty over netlink), and
// comes back empty after a flush. Other errors are logged and treated as
// "present", since a full sync would not fix them either.
func (s *syncer) tableMissing(ctx context.Context) bool {
	rules, err := s.nft.ListRules(ctx, natOutputChain)
	switch {
	case err == nil && len(rules) == 0:
		s.logger.Info("The nftables canary chain has no rules; the table was flushed", "chain", natOutputChain)
		return true
	case err == nil:
		return false
	case isNotFound(err):
		s.logger.Info("The nftables table or its canary chain is gone", "chain", natOutputChain)
		return true
	}
	s.logger.Error(err, "Checking the nftables table failed")
	return false
}

// deleteStaleChains deletes chains that were flushed at least minAge ago.
// Waiting matters: before kernel 6.2, a chain stays referenced for a short
// while after the last map element pointing to it is deleted.
func (s *syncer) deleteStaleChains(ctx context.Context, now time.Time, minAge time.Duration) error {
	if len(s.view.stale) == 0 {
		return nil
	}
	tx := s.nft.NewTransaction()
	var names []string
	for name, flushed := range s.view.stale {
		if now.Sub(flushed) >= minAge {
			tx.Delete(&knftables.Chain{Name: name})
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	s.logger.Info("Deleting stale nftables chains", "numChains", len(names))
	genBefore, genOK := s.driftState.beforeWrite()
	if err := s.nft.Run(ctx, tx); err != nil {
		s.view.invalidate()
		s.driftState.writeFailed()
		s.logFailure(tx)
		return fmt.Errorf("deleting %d stale chains: %w", len(names), err)
	}
	for _, name := range names {
		delete(s.view.stale, name)
		delete(s.view.chains.have, name)
	}
	s.driftState.afterWrite(genBefore, genOK, 1, false, nil, func(yield func(string)) {
		for _, name := range names {
			yield(name)
		}
	})
	return nil
}

// logFailure logs a failed transaction and the table, rate limited because
// the table can be huge.
func (s *syncer) logFailure(tx *knftables.Transaction) {
	klogV4 := s.logger.V(4)
	if !klogV4.Enabled() || !s.logRateLimiter.Allow() {
		return
	}
	klogV4.Info("Failed transaction", "transaction", tx.String())
	switch s.nft.(type) {
	case *knftables.Fake, *DryRunInterface, *memoryTable:
		return // no kernel table to list
	}
	out, err := exec.Command("nft", "list", "table", string(familyOf(s.family)), kubeProxyTable).Output()
	if err != nil {
		klogV4.Info("Listing full table failed", "error", err)
		return
	}
	klogV4.Info("Listing full table", "result", string(out))
}

func familyOf(f v1.IPFamily) knftables.Family {
	if f == v1.IPv6Protocol {
		return knftables.IPv6Family
	}
	return knftables.IPv4Family
}

// base chains: name = "<type>-<hook>", hooked at the listed priority.
var baseChains = []struct {
	name      string
	chainType knftables.BaseChainType
	hook      knftables.BaseChainHook
	priority  knftables.BaseChainPriority
}{
	// Pre-DNAT filter chains see the original destination, which the
	// loadBalancerSourceRanges firewall needs.
	{filterPreroutingPreDNATChain, knftables.FilterType, knftables.PreroutingHook, knftables.DNATPriority + "-10"},
	{filterOutputPreDNATChain, knftables.FilterType, knftables.OutputHook, knftables.DNATPriority + "-10"},
	{filterInputChain, knftables.FilterType, knftables.InputHook, knftables.FilterPriority},
	{filterForwardChain, knftables.FilterType, knftables.ForwardHook, knftables.FilterPriority},
	{filterOutputChain, knftables.FilterType, knftables.OutputHook, knftables.FilterPriority},
	{natPreroutingChain, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority},
	{natOutputChain, knftables.NATType, knftables.OutputHook, knftables.DNATPriority},
	{natPostroutingChain, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority},
}

// jumps from base chains to our top-level regular chains.
var jumpChains = []struct{ dst, src, match string }{
	// Rejects are not allowed in prerouting before kernel 5.9, so the
	// no-endpoint checks hook input/forward/output instead.
	{nodePortEndpointsCheckChain, filterInputChain, "ct state new"},
	{serviceEndpointsCheckChain, filterInputChain, "ct state new"},
	{serviceEndpointsCheckChain, filterForwardChain, "ct state new"},
	{serviceEndpointsCheckChain, filterOutputChain, "ct state new"},
	{firewallCheckChain, filterPreroutingPreDNATChain, "ct state new"},
	{firewallCheckChain, filterOutputPreDNATChain, "ct state new"},
	{servicesChain, natOutputChain, ""},
	{servicesChain, natPreroutingChain, ""},
	{masqueradingChain, natPostroutingChain, ""},
	{clusterIPsCheckChain, filterForwardChain, "ct state new"},
	{clusterIPsCheckChain, filterOutputChain, "ct state new"},
}

// setup writes the fixed part of the table (everything not owned by a
// service port) as one unit. It runs on full syncs only.
func (s *syncer) setup(pl *plan) {
	ipX, addrType := s.gen.ipX, s.gen.addrType
	matchLocalhost, matchNotLocalhost := "ip daddr 127.0.0.0/8", "ip daddr != 127.0.0.0/8"
	if s.family == v1.IPv6Protocol {
		matchLocalhost, matchNotLocalhost = "ip6 daddr ::1", "ip6 daddr != ::1"
	}
	masqRule := s.gen.masqueradeRule

	pl.add(&knftables.Table{Comment: ptr.To("rules for kube-proxy")})

	if !s.recreatedBaseChains {
		for _, bc := range baseChains {
			pl.add(&knftables.Chain{Name: bc.name})
			pl.delete(&knftables.Chain{Name: bc.name})
		}
		s.recreatedBaseChains = true
	}
	for _, bc := range baseChains {
		ch := &knftables.Chain{Name: bc.name, Type: ptr.To(bc.chainType), Hook: ptr.To(bc.hook), Priority: ptr.To(bc.priority)}
		pl.add(ch)
		pl.flush(ch)
	}

	created := map[string]bool{}
	ensure := func(name string) {
		if created[name] {
			return
		}
		created[name] = true
		pl.add(&knftables.Chain{Name: name})
		pl.flush(&knftables.Chain{Name: name})
	}
	for _, j := range jumpChains {
		ensure(j.dst)
		pl.add(&knftables.Rule{Chain: j.src, Rule: knftables.Concat(j.match, "jump", j.dst)})
	}
	for _, name := range []string{servicesChain, clusterIPsCheckChain, masqueradingChain} {
		ensure(name)
	}

	pl.add(&knftables.Set{
		Name:    hairpinConnectionsSet,
		Type:    addrType + " . " + addrType + " . inet_proto . inet_service",
		Comment: ptr.To("service hairpin connections"),
	})
	pl.add(&knftables.Rule{
		Chain: masqueradingChain,
		Rule:  knftables.Concat("mark", "and", s.gen.masqueradeMark, "!=", "0", "mark", "set", "mark", "xor", s.gen.masqueradeMark, "masquerade fully-random"),
	})
	pl.add(&knftables.Rule{
		Chain: masqueradingChain,
		Rule:  knftables.Concat("ct status dnat", ipX, "saddr", ".", ipX, "daddr", ".", "meta l4proto", ".", "th dport", "@", hairpinConnectionsSet, "masquerade fully-random"),
	})

	pl.add(&knftables.Set{Name: clusterIPsSet, Type: addrType, Comment: ptr.To("Active ClusterIPs")})
	s.clusterIPsCheckRules(pl)

	// "add" before "delete"/"flush" so both succeed whether or not the set
	// already exists.
	pl.add(&knftables.Set{Name: nodePortIPsSet, Type: addrType, Comment: ptr.To("IPs that accept NodePort traffic")})
	if s.nodePortAddresses.MatchAll() {
		pl.delete(&knftables.Set{Name: nodePortIPsSet})
	} else {
		pl.flush(&knftables.Set{Name: nodePortIPsSet})
		nodeIPs, err := s.nodePortAddresses.GetNodeIPs(s.networkInterfacer)
		if err != nil {
			s.logger.Error(err, "Failed to get node IP addresses matching nodePortAddresses; NodePorts may not work as intended", "CIDRs", s.nodePortAddresses)
		}
		for _, ip := range nodeIPs {
			if ip.IsLoopback() {
				continue
			}
			pl.add(&knftables.Element{Set: nodePortIPsSet, Key: []string{ip.String()}})
		}
	}

	pl.add(&knftables.Map{
		Name:    noEndpointServicesMap,
		Type:    addrType + " . inet_proto . inet_service : verdict",
		Comment: ptr.To("vmap to drop or reject packets to services with no endpoints"),
	})
	pl.add(&knftables.Map{
		Name:    noEndpointNodePortsMap,
		Type:    "inet_proto . inet_service : verdict",
		Comment: ptr.To("vmap to drop or reject packets to service nodeports with no endpoints"),
	})
	pl.add(&knftables.Chain{Name: rejectChain, Comment: ptr.To("helper for @no-endpoint-services / @no-endpoint-nodeports")})
	pl.flush(&knftables.Chain{Name: rejectChain})
	pl.add(&knftables.Rule{Chain: rejectChain, Rule: "reject"})

	pl.add(&knftables.Rule{
		Chain: serviceEndpointsCheckChain,
		Rule:  knftables.Concat(ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", noEndpointServicesMap),
	})
	if s.nodePortAddresses.MatchAll() {
		pl.add(&knftables.Rule{
			Chain: nodePortEndpointsCheckChain,
			Rule:  knftables.Concat(matchNotLocalhost, "meta l4proto . th dport", "vmap", "@", noEndpointNodePortsMap),
		})
	} else {
		pl.add(&knftables.Rule{
			Chain: nodePortEndpointsCheckChain,
			Rule:  knftables.Concat(ipX, "daddr", "@", nodePortIPsSet, "meta l4proto . th dport", "vmap", "@", noEndpointNodePortsMap),
		})
	}

	rejected := map[v1.Protocol]bool{}
	pl.add(&knftables.Map{
		Name:    localhostNodePortRejectMap,
		Type:    "inet_proto . inet_service : verdict",
		Comment: ptr.To("localhost NodePorts rejected by kube-proxy"),
	})
	if len(s.rejectProtocols) > 0 {
		for _, protocol := range s.rejectProtocols {
			rejected[protocol] = true
			counter := metrics.LocalhostNodePortRejectedCounterName(protocol)
			pl.add(&knftables.Counter{Name: counter})
			chain := localhostNodePortRejectChainName(protocol)
			ensure(chain)
			pl.add(&knftables.Rule{Chain: chain, Rule: knftables.Concat("counter name", fmt.Sprintf("%q", counter), "reject")})
		}
		pl.add(&knftables.Rule{
			Chain: nodePortEndpointsCheckChain,
			Rule:  knftables.Concat(matchLocalhost, "meta l4proto . th dport", "vmap", "@", localhostNodePortRejectMap),
		})
	} else {
		pl.delete(&knftables.Map{Name: localhostNodePortRejectMap})
	}
	// Remove reject objects of protocols no longer rejected (config change),
	// chain before the counter its rule references.
	for _, protocol := range metrics.LocalhostNodePortRejectableProtocols {
		if rejected[protocol] {
			continue
		}
		ch := &knftables.Chain{Name: localhostNodePortRejectChainName(protocol)}
		pl.add(ch)
		pl.delete(ch)
		ctr := &knftables.Counter{Name: metrics.LocalhostNodePortRejectedCounterName(protocol)}
		pl.add(ctr)
		pl.delete(ctr)
	}

	pl.add(&knftables.Map{
		Name:    firewallIPsMap,
		Type:    addrType + " . inet_proto . inet_service : verdict",
		Comment: ptr.To("destinations that are subject to LoadBalancerSourceRanges"),
	})
	ensure(firewallCheckChain)
	pl.add(&knftables.Rule{
		Chain: firewallCheckChain,
		Rule:  knftables.Concat(ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", firewallIPsMap),
	})

	pl.add(&knftables.Map{
		Name:    serviceIPsMap,
		Type:    addrType + " . inet_proto . inet_service : verdict",
		Comment: ptr.To("ClusterIP, ExternalIP and LoadBalancer IP traffic"),
	})
	pl.add(&knftables.Map{
		Name:    serviceNodePortsMap,
		Type:    "inet_proto . inet_service : verdict",
		Comment: ptr.To("NodePort traffic"),
	})

	if s.masqueradeAll {
		pl.add(&knftables.Rule{
			Chain:   servicesChain,
			Rule:    knftables.Concat(ipX, "daddr", "@", clusterIPsSet, masqRule),
			Comment: ptr.To("masquerade all clusterIP traffic"),
		})
	} else if s.localDetector.IsImplemented() {
		// Off-cluster clients may route the service range to any node; the
		// chosen endpoint may be elsewhere, so replies must come back here.
		pl.add(&knftables.Rule{
			Chain:   servicesChain,
			Rule:    knftables.Concat(ipX, "daddr", "@", clusterIPsSet, s.localDetector.IfNotLocalNFT(), masqRule),
			Comment: ptr.To("masquerade clusterIP traffic from outside cluster"),
		})
	}
	pl.add(&knftables.Rule{
		Chain: servicesChain,
		Rule:  knftables.Concat(ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", serviceIPsMap),
	})
	if s.nodePortAddresses.MatchAll() {
		pl.add(&knftables.Rule{
			Chain: servicesChain,
			Rule:  knftables.Concat("fib daddr type local", matchNotLocalhost, "meta l4proto . th dport", "vmap", "@", serviceNodePortsMap),
		})
	} else {
		pl.add(&knftables.Rule{
			Chain: servicesChain,
			Rule:  knftables.Concat(ipX, "daddr @nodeport-ips", "meta l4proto . th dport", "vmap", "@", serviceNodePortsMap),
		})
	}
	pl.endUnit()
}

func (s *syncer) clusterIPsCheckRules(pl *plan) {
	pl.add(&knftables.Rule{
		Chain:   clusterIPsCheckChain,
		Rule:    knftables.Concat(s.gen.ipX, "daddr", "@", clusterIPsSet, "reject"),
		Comment: ptr.To("Reject traffic to invalid ports of ClusterIPs"),
	})
	if s.serviceCIDRs != "" {
		pl.add(&knftables.Rule{
			Chain:   clusterIPsCheckChain,
			Rule:    knftables.Concat(s.gen.ipX, "daddr", "{", s.serviceCIDRs, "}", "drop"),
			Comment: ptr.To("Drop traffic to unallocated ClusterIPs"),
		})
	}
}
