//go:build linux

package nftables

import (
	"context"
	"fmt"
	"iter"
	"net"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/localnodeportproxy"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// rulesBackend is the Proxier seen as the Shell's backend. It is a separate
// type so that its Sync does not clash with Provider's Sync.
type rulesBackend Proxier

var (
	_ syncshell.Backend      = &rulesBackend{}
	_ syncshell.DriftChecker = &rulesBackend{}
)

// Sync turns u into nft transactions: every service port's rules on a full
// sync, only the changed Services' otherwise.
func (b *rulesBackend) Sync(ctx context.Context, u *syncshell.Update) (syncshell.Outcome, error) {
	p := (*Proxier)(b)
	var out syncshell.Outcome
	start := time.Now()
	full := u.Full
	if err := p.syncer.deleteStaleChains(ctx, start, staleChainMinAge); err != nil {
		p.logger.Error(err, "Unable to delete stale chains; will retry with a full sync")
		metrics.NFTablesCleanupFailuresTotal.WithLabelValues(string(p.ipFamily)).Inc()
		full, out.Full = true, true
	}

	in := syncInput{full: full}
	if full {
		clear(p.synced)
	} else {
		for _, name := range u.RemovedPorts {
			if ss := p.synced[name]; ss != nil {
				in.removed = append(in.removed, ss.owner)
				delete(p.synced, name)
			}
		}
	}
	nodePortsChanged := full || len(in.removed) > 0
	in.each = func(yield func(string, *serviceModel) bool) {
		for name, svc := range u.Services {
			if !full && !u.Changed(name.NamespacedName) {
				continue
			}
			var m *serviceModel
			var ss *syncedService
			if tp := u.Policy(name); tp != nil {
				m, ss = p.model(ctx, name, svc, tp)
			}
			if m == nil {
				// A port the node-local model leaves out must not keep the
				// rules an earlier sync gave it.
				if old := p.synced[name]; old != nil {
					delete(p.synced, name)
					if !yield(old.owner, nil) {
						return
					}
				}
				continue
			}
			p.synced[name] = ss
			nodePortsChanged = true
			if !yield(m.owner, m) {
				return
			}
		}
	}
	if u.ServiceCIDRsChanged || full {
		p.syncer.setServiceCIDRs(strings.Join(u.ServiceCIDRs, ","))
	}
	in.rewriteClusterIPsCheck = u.ServiceCIDRsChanged

	res, err := p.syncer.sync(ctx, in)
	out.Programmed = res.transactions > 0
	// Flushed chains can be deleted a second later; ask for a sync then
	// rather than leaving them until the next change or the hourly sync.
	if p.syncer.staleChainsPending() {
		out.SyncAgainAfter = staleChainMinAge
	}
	if err != nil {
		metrics.NFTablesSyncFailuresTotal.WithLabelValues(string(p.ipFamily)).Inc()
		return out, fmt.Errorf("nftables sync failed: %w", err)
	}
	p.logger.V(2).Info("Reloaded service nftables data", "numServices", len(u.Services), "operations", res.ops, "transactions", res.transactions)

	if p.localhostNodePortProxy != nil && nodePortsChanged {
		var specs []localnodeportproxy.NodePortSpec
		for _, ss := range p.synced {
			if ss.nodePort != nil {
				specs = append(specs, *ss.nodePort)
			}
		}
		p.localhostNodePortProxy.SyncNodePorts(specs)
	}
	return out, nil
}

// Drift compares our table with what the syncer programmed (drift.go).
func (b *rulesBackend) Drift(ctx context.Context) ([]syncshell.Drift, error) {
	return (*Proxier)(b).syncer.drift(ctx)
}

// model converts a valid service port and its resolved traffic policy into
// the generator's model, through the library's node-local model so that
// third-party backends and this one are handed the same thing. It returns nil
// for a port the node-local model leaves out (logged to ctx's logger).
func (p *Proxier) model(ctx context.Context, name proxy.ServicePortName, svc proxy.ServicePort, tp *proxy.TrafficPolicy) (*serviceModel, *syncedService) {
	ln, ok := p.local.ComputeServicePort(ctx, name, svc, tp)
	if !ok {
		return nil, nil
	}
	return p.modelOf(name, svc, &ln)
}

// modelOf builds the generator's model of a service port from its
// node-local model.
func (p *Proxier) modelOf(name proxy.ServicePortName, svc proxy.ServicePort, ln *localnode.Service) (*serviceModel, *syncedService) {
	protocol := strings.ToLower(string(name.Protocol))
	owner := name.String()
	m := &serviceModel{
		owner:                owner,
		protocol:             protocol,
		clusterIP:            ln.ClusterIP.String(),
		port:                 int(ln.Port),
		nodePort:             int(ln.NodePort),
		affinity:             ln.SessionAffinity == localnode.AffinityClientIP,
		stickySeconds:        int(ln.AffinityTimeout / time.Second),
		externalPolicyLocal:  ln.ExternalPolicy == localnode.PolicyLocal,
		internalPolicyLocal:  ln.InternalPolicy == localnode.PolicyLocal,
		externallyAccessible: ln.ExternallyAccessible(),
		internal:             ln.InternalNoEndpoints(),
		external:             ln.ExternalNoEndpoints(),
		hasEndpoints:         ln.HasAnyEndpoints,
	}
	namespace, svcName, portName := name.Namespace, name.Name, name.Port
	if info, ok := svc.(*servicePortInfo); ok {
		namespace, svcName, portName = info.namespace, info.name, info.portName
	}
	newServiceChains(m, namespace, svcName, portName)
	for _, ip := range ln.ExternalIPs {
		m.externalIPs = append(m.externalIPs, ip.String())
	}
	for _, ip := range ln.LoadBalancerVIPs {
		m.lbVIPs = append(m.lbVIPs, ip.String())
	}
	for _, r := range ln.SourceRanges {
		m.sourceRanges = append(m.sourceRanges, &net.IPNet{IP: r.Addr().AsSlice(), Mask: net.CIDRMask(r.Bits(), r.Addr().BitLen())})
	}

	order := ln.RuleOrder()
	all := make([]endpointModel, len(order.Endpoints))
	m.reachableEndpoints = make([]*endpointModel, len(all))
	for k, ep := range order.Endpoints {
		endpoint := order.Text[k]
		all[k] = endpointModel{ip: hostOf(endpoint, ep.IP.Is6()), port: int(ep.Port), local: ep.Local, endpoint: endpoint,
			namespace: namespace, name: svcName, protocol: protocol, portName: portName}
		m.reachableEndpoints[k] = &all[k]
	}
	m.clusterEndpoints = make([]*endpointModel, len(order.Cluster))
	for j, k := range order.Cluster {
		m.clusterEndpoints[j] = &all[k]
	}
	m.localEndpoints = make([]*endpointModel, len(order.Local))
	for j, k := range order.Local {
		m.localEndpoints[j] = &all[k]
	}
	m.usesCluster = len(m.clusterEndpoints) > 0
	m.usesLocal = len(m.localEndpoints) > 0
	m.rejectLocalhostNodePort = m.nodePort != 0 && p.syncer.rejectsLocalhostNodePort(name.Protocol)

	ss := &syncedService{owner: owner}
	if p.localhostNodePortProxy != nil && m.nodePort != 0 && name.Protocol == v1.ProtocolTCP {
		eps := m.clusterEndpoints
		if m.externalPolicyLocal {
			eps = m.localEndpoints
		}
		spec := &localnodeportproxy.NodePortSpec{
			ServicePortName:     name,
			Protocol:            name.Protocol,
			NodePort:            m.nodePort,
			SessionAffinityType: v1.ServiceAffinity(ln.SessionAffinity),
			StickyMaxAgeSeconds: m.stickySeconds,
		}
		for _, ep := range eps {
			spec.Endpoints = append(spec.Endpoints, ep.endpoint)
		}
		ss.nodePort = spec
	}
	return m, ss
}

// hostOf returns the address part of an "ip:port" string ("[ip]:port" for
// IPv6) without allocating: at 10k services a full sync models 100k
// endpoints, and a second string per endpoint was a measurable share of it.
func hostOf(endpoint string, is6 bool) string {
	host := endpoint[:strings.LastIndexByte(endpoint, ':')]
	if is6 {
		host = host[1 : len(host)-1]
	}
	return host
}

// The rest of this file is the syncer, the part of the backend that owns the
// table of one family and knows nothing of the shell or the trackers: handed
// models, it generates their rules (generator.go), diffs them against what is
// programmed (view.go), plans the difference (plan.go) and applies the plan
// through nft or, for endpoint elements, netlink (nlbatch.go).

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
	// changes without nft (nlbatch.go); nil sends everything through nft.
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
