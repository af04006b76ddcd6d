//go:build linux

package nftables

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/localnodeportproxy"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
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
