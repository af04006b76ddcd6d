//go:build linux

package nftables

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/proxy/metrics"
)

// The fixed part of the table: the base chains, the jumps from them, and the
// sets, maps and rules that every service port's rules go through but no
// service port owns. A full sync rewrites all of it as one unit of its plan;
// a partial sync touches it only to rewrite cluster-ips-check when the
// ServiceCIDRs changed.

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
