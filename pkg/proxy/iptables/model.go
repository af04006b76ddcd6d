//go:build linux

package iptables

import (
	"context"
	"strings"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	utiliptables "k8s.io/net-utils/iptables"
)

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
