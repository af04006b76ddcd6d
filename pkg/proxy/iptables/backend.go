//go:build linux

package iptables

import (
	"context"
	"net"
	"slices"
	"strings"
	"time"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	utiliptables "k8s.io/net-utils/iptables"
)

// rulesBackend is the Proxier seen as the Shell's backend. It is a separate
// type so that its Sync does not clash with Provider's Sync.
type rulesBackend Proxier

var (
	_ syncshell.Backend              = &rulesBackend{}
	_ syncshell.ServicePortValidator = &rulesBackend{}
)

// ValidServicePort leaves out service ports no rule can be written for
// (newServiceInfo said why). The Shell has already left out what no backend
// can program and anything newServiceInfo did not make, so svc is ours (the
// checked assertion only keeps a direct caller from panicking).
func (b *rulesBackend) ValidServicePort(name proxy.ServicePortName, svc proxy.ServicePort) bool {
	if info, ok := svc.(*servicePortInfo); ok && info.invalid != "" {
		b.logger.Error(nil, "Skipping service port with invalid data", "servicePort", name.String(), "reason", info.invalid)
		return false
	}
	return true
}

// Sync, upstream's syncProxyRules, is the only place rules are written
// (apart from cleanup): the generator renders what changed, the view decides
// what of it the restore must hold, and the syncer applies it.
func (b *rulesBackend) Sync(ctx context.Context, u *syncshell.Update) (out syncshell.Outcome, retErr error) {
	p := (*Proxier)(b)
	endpoints := countEndpoints(u)
	full := u.Full
	if large := endpoints > largeClusterEndpointsThreshold; large != p.gen.large {
		// Comments differ between the modes, so every rendered port is stale.
		p.gen.large = large
		full = true
	}
	out.Full = full && !u.Full
	p.logger.V(2).Info("Syncing iptables rules", "fullSync", full)
	defer func() {
		out.NoPeriodicFullSync = p.gen.large
		if retErr != nil {
			p.syncFailed(full)
			retErr = errSyncFailed
		}
	}()

	if full {
		counters, err := p.syncer.prepareFull()
		if err != nil {
			return out, err
		}
		p.gen.counters = counters
	}
	t := &p.tables
	// A full sync keeps its heap near what it holds live while it renders
	// (proxyutil.HeapPacer).
	var pacer *proxyutil.HeapPacer
	if full {
		pacer = proxyutil.NewHeapPacer()
	}
	p.view.syncPorts(u)
	if full {
		t.reserve(len(u.Services), endpoints)
	} else {
		t.release()
	}
	p.gen.begin(t)
	skippedRules := p.renderPorts(ctx, t, u, full, pacer)
	stale := p.staleChains(full)
	for _, c := range stale {
		t.natChains.chainLine(c)
	}
	p.gen.end(t, p.nodePortIPs())
	if pacer != nil {
		pacer.Pace()
	}

	filter, natTop := p.view.topLevelWrites(t, full, time.Now(), p.syncPeriod)
	p.reportRules(t, filter, natTop, skippedRules)
	p.logger.V(2).Info("Reloading service iptables data",
		"numServices", len(u.Services),
		"numEndpoints", endpoints,
		"numFilterChains", t.filterChains.lines,
		"numFilterRules", t.filterRules.lines,
		"numNATChains", t.natChains.lines,
		"numNATRules", t.natRules.lines+t.dispatch.lines,
	)
	wrote, err := p.syncer.restore(t, filter, natTop, stale, p.view.chains)
	if err != nil {
		return out, err
	}
	out.Programmed = wrote
	p.view.commit(t, full, filter, natTop, time.Now())
	return out, nil
}

func countEndpoints(u *syncshell.Update) int {
	n := 0
	for name := range u.Services {
		n += len(u.Endpoints[name])
	}
	return n
}

// syncFailed forgets what the kernel holds: the trackers have been drained,
// so what changed is lost and only a full sync can bring it back in line.
func (p *Proxier) syncFailed(full bool) {
	p.logger.Info("Sync failed", "retryingTime", p.syncPeriod)
	if !full {
		metrics.IPTablesPartialRestoreFailuresTotal.WithLabelValues(string(p.ipFamily)).Inc()
	}
	p.view.invalidate()
}

// renderPorts adds every service port's rules to t in order: re-rendered
// if the port changed (or on a full sync), else as last rendered. It
// returns how many rules of the ports' own chains it left out. pacer, if
// set, may collect as it goes.
func (p *Proxier) renderPorts(ctx context.Context, t *tables, u *syncshell.Update, full bool, pacer *proxyutil.HeapPacer) (skippedRules int) {
	for i, name := range p.view.order {
		if pacer != nil && i%64 == 63 {
			pacer.Pace()
		}
		svc, ok := u.Services[name]
		if !ok {
			continue
		}
		info, _ := svc.(*servicePortInfo) // nil when ValidServicePort refused it
		r := p.view.ports[name]
		if full || u.Changed(name.NamespacedName) || r == nil || r.info != info {
			r = p.view.beginRender(name)
			var m *portModel
			if tp := u.Policy(name); info != nil && tp != nil {
				m = p.portModel(ctx, r, name, info, tp)
			}
			p.gen.servicePort(t, r, info, m)
			p.view.endRender(name, r)
		} else {
			skippedRules += r.ownRules
		}
		t.filterRules.appendBuf(&r.filter)
		t.dispatch.appendBuf(&r.dispatch)
	}
	return skippedRules
}

// staleChains returns the chains this sync deletes: those ports dropped,
// and on a full sync also our chains the kernel holds but no port uses.
// Partial syncs never need iptables-save.
func (p *Proxier) staleChains(full bool) []utiliptables.Chain {
	stale := p.view.takeStale(full || !p.gen.large, time.Now(), p.syncPeriod)
	if full {
		if existing, ok := p.syncer.natChains(); ok {
			stale = append(stale, p.view.leftovers(existing)...)
		}
	}
	slices.Sort(stale)
	return slices.Compact(stale)
}

// nodePortIPs returns the addresses NodePorts are served on, or nil when
// nodePortAddresses matches every local address.
func (p *Proxier) nodePortIPs() []net.IP {
	if p.gen.allNodePorts {
		return nil
	}
	ips, err := p.nodePortAddresses.GetNodeIPs(p.networkInterfacer)
	if err != nil {
		p.logger.Error(err, "Failed to get node ip address matching nodeport cidrs, services with nodeport may not work as intended", "CIDRs", p.nodePortAddresses)
	}
	return ips
}

// reportRules sets the rule count metrics: every rule in each table, and
// how many this sync's restore writes.
func (p *Proxier) reportRules(t *tables, filter, natTop bool, skippedRules int) {
	family := string(p.ipFamily)
	natLines := t.natRules.lines + t.dispatch.lines
	natWritten := natLines
	if !natTop {
		natWritten -= t.natTopLines + t.dispatch.lines - t.editInserts
	}
	filterWritten := 0
	if filter {
		filterWritten = t.filterRules.lines
	}
	metrics.IPTablesRulesTotal.WithLabelValues(string(utiliptables.TableFilter), family).Set(float64(t.filterRules.lines))
	metrics.IPTablesRulesLastSync.WithLabelValues(string(utiliptables.TableFilter), family).Set(float64(filterWritten))
	metrics.IPTablesRulesTotal.WithLabelValues(string(utiliptables.TableNAT), family).Set(float64(natLines + skippedRules))
	metrics.IPTablesRulesLastSync.WithLabelValues(string(utiliptables.TableNAT), family).Set(float64(natWritten))
}

// portModel is what the generator renders one service port from: the
// library's node-local model of the port (the same value third-party
// backends and the nftables backend are handed) plus the per-endpoint
// strings the rules need, endpoints in the brain's "ip:port" order, which
// the SEP chains and the probability cascades follow.
type portModel struct {
	// info and tp are the inputs ln was computed from, so that a port
	// re-rendered with the same inputs (every port of a full sync) is not
	// converted again.
	info *servicePortInfo
	tp   *proxy.TrafficPolicy

	ln                 localnode.Service
	internal, external proxy.NoEndpointsAction
	// reachable is one entry per endpoint of ln; cluster and local point
	// into it and are empty when the port does not use that policy.
	reachable      []sepInfo
	cluster, local []*sepInfo
}

// sepInfo is one endpoint's strings: a SHA-256 per endpoint goes into the
// chain name, so they are kept across syncs while the endpoint stays.
type sepInfo struct {
	endpoint string // "ip:port", IPv6 bracketed
	ip       string // a substring of endpoint
	chain    utiliptables.Chain
	comment  string // `"ns/svc:port -> ip:port"`
}

// portModel returns the model to render name from, converting it through
// localnode.Computer.ComputeServicePort unless the port's ServicePort and
// resolved policy are the very ones the previous model came from. It
// returns nil for a port the node-local model leaves out (logged there).
func (p *Proxier) portModel(ctx context.Context, r *portRules, name proxy.ServicePortName, info *servicePortInfo, tp *proxy.TrafficPolicy) *portModel {
	if r.model == nil {
		r.model = &portModel{}
	}
	m := r.model
	if m.info == info && m.tp != nil && tp.Unchanged(m.tp) {
		m.tp = tp
		return m
	}
	ln, ok := p.local.ComputeServicePort(ctx, name, info, tp)
	if !ok {
		*m = portModel{}
		return nil
	}
	old := m.reachable
	*m = portModel{info: info, tp: tp, ln: ln, internal: ln.InternalNoEndpoints(), external: ln.ExternalNoEndpoints()}

	order := ln.RuleOrder()
	n := len(order.Endpoints)
	if n == 0 {
		return m
	}
	m.reachable = make([]sepInfo, n)
	// old is in the same order, so one merge pass finds the endpoints that
	// stayed and keeps their chain names and comments.
	j := 0
	for k, t := range order.Text {
		for j < len(old) && old[j].endpoint < t {
			j++
		}
		if j < len(old) && old[j].endpoint == t {
			m.reachable[k] = old[j]
			j++
		} else {
			m.reachable[k] = newSEPInfo(info, t, order.Endpoints[k].IP.Is6())
		}
	}
	// One backing array: the cluster endpoints, then the local ones.
	byPolicy := make([]*sepInfo, 0, len(order.Cluster)+len(order.Local))
	for _, k := range order.Cluster {
		byPolicy = append(byPolicy, &m.reachable[k])
	}
	m.cluster = byPolicy[:len(byPolicy):len(byPolicy)]
	for _, k := range order.Local {
		byPolicy = append(byPolicy, &m.reachable[k])
	}
	m.local = byPolicy[len(m.cluster):]
	return m
}

func newSEPInfo(info *servicePortInfo, endpoint string, is6 bool) sepInfo {
	ip := endpoint[:strings.LastIndexByte(endpoint, ':')]
	if is6 {
		ip = ip[1 : len(ip)-1]
	}
	return sepInfo{
		endpoint: endpoint,
		ip:       ip,
		chain:    endpointChainName(info.nameString, info.protocol, endpoint),
		comment:  `"` + info.nameString + ` -> ` + endpoint + `"`,
	}
}
