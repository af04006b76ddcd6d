//go:build linux

package nftables

import (
	"net"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/proxy"
)

// generator turns serviceModels into the chains, sets and elements they need.
// It holds only per-proxier constants, so it is safe to share.
type generator struct {
	ipX      string // "ip" or "ip6"
	addrType string // "ipv4_addr" or "ipv6_addr"

	masqueradeMark string
	masqueradeRule string

	// ruleBalanceMax is the largest endpoint count of an affinity service
	// balanced with per-endpoint rules (maxRuleBalancedEndpoints).
	ruleBalanceMax int
	// inlineMaps balances with an anonymous map per chain instead of the
	// endpoint maps: upstream's shape, used when nft cannot declare endpoint
	// maps (and by benchmarks comparing the two).
	inlineMaps bool

	// ifLocal is nil when no local-traffic detector is implemented.
	ifLocal []string
	nodeIP  net.IP
}

var (
	commentMasquerade      = ptr.To("masquerade")
	commentShortCircuitPod = ptr.To("short-circuit pod traffic")
	commentMasqLocal       = ptr.To("masquerade local traffic")
	commentShortCircuitLoc = ptr.To("short-circuit local traffic")
)

// build computes what m contributes, taking endpoint map slots from slots.
// The order of chains and elements is deterministic so that transactions and
// dumps are reproducible.
func (g *generator) build(svc *serviceModel, slots slotSource) *serviceRules {
	out := &serviceRules{}
	port := strconv.Itoa(svc.port)
	comment := ptr.To(truncateComment(svc.owner))

	// Chains are created in a fixed order: endpoint chains first so that the
	// policy chains jumping to them never reference a missing chain.
	if svc.affinity {
		for _, ep := range svc.reachableEndpoints {
			out.chains = append(out.chains, chainSpec{
				name: ep.chain(),
				rules: []ruleSpec{
					{rule: "update @" + ep.affinitySet() + " { " + g.ipX + " saddr }"},
					{rule: "meta l4proto " + svc.protocol + " dnat to " + ep.endpoint},
				},
			})
			out.sets = append(out.sets, setSpec{name: ep.affinitySet(), timeout: time.Duration(svc.stickySeconds) * time.Second})
		}
	}
	for _, ep := range svc.reachableEndpoints {
		if ep.local {
			out.elems = append(out.elems, elemSpec{c: cHairpin, key: ep.ip + " . " + ep.ip + " . " + svc.protocol + " . " + strconv.Itoa(ep.port)})
		}
	}

	if svc.usesCluster {
		out.chains = append(out.chains, chainSpec{name: svc.clusterChain, rules: g.endpointRules(svc, svc.clusterChain, svc.clusterEndpoints, slots, out)})
	}
	if svc.usesLocal {
		out.chains = append(out.chains, chainSpec{name: svc.localChain, rules: g.endpointRules(svc, svc.localChain, svc.localEndpoints, slots, out)})
	}

	internalChain := svc.clusterChain
	if svc.internalPolicyLocal {
		internalChain = svc.localChain
	}
	externalPolicyChain := svc.clusterChain
	if svc.externalPolicyLocal {
		externalPolicyChain = svc.localChain
	}
	hasInternal := svc.internal == proxy.Forward
	hasExternal := svc.external == proxy.Forward

	// The external chain exists whenever there are endpoints anywhere, even
	// with no locally usable ones, because it carries the short-circuit rules
	// for pod- and host-originated traffic.
	if svc.hasEndpoints && svc.externallyAccessible {
		ch := chainSpec{name: svc.externalChain}
		if !svc.externalPolicyLocal {
			ch.rules = append(ch.rules, ruleSpec{rule: g.masqueradeRule, comment: commentMasquerade})
		} else {
			if g.ifLocal != nil {
				ch.rules = append(ch.rules, ruleSpec{rule: knftables.Concat(g.ifLocal, "goto", svc.clusterChain), comment: commentShortCircuitPod})
			}
			ch.rules = append(ch.rules,
				ruleSpec{rule: "fib saddr type local " + g.masqueradeRule, comment: commentMasqLocal},
				ruleSpec{rule: "fib saddr type local goto " + svc.clusterChain, comment: commentShortCircuitLoc},
			)
		}
		if hasExternal {
			ch.rules = append(ch.rules, ruleSpec{rule: "goto " + externalPolicyChain})
		}
		out.chains = append(out.chains, ch)
	}

	internalVerdict, externalVerdict := verdictFor(svc.internal), verdictFor(svc.external)

	dest := func(ip string) string { return ip + " . " + svc.protocol + " . " + port }

	out.elems = append(out.elems, elemSpec{c: cClusterIPs, key: svc.clusterIP})
	if hasInternal {
		out.elems = append(out.elems, elemSpec{c: cServiceIPs, key: dest(svc.clusterIP), value: "goto " + internalChain})
	} else {
		out.elems = append(out.elems, elemSpec{c: cNoEndpointServices, key: dest(svc.clusterIP), value: internalVerdict, comment: comment})
	}

	for _, ip := range svc.externalIPs {
		if svc.hasEndpoints {
			out.elems = append(out.elems, elemSpec{c: cServiceIPs, key: dest(ip), value: "goto " + svc.externalChain})
		}
		if !hasExternal {
			out.elems = append(out.elems, elemSpec{c: cNoEndpointServices, key: dest(ip), value: externalVerdict, comment: comment})
		}
	}

	usesFirewall := len(svc.lbVIPs) > 0 && len(svc.sourceRanges) > 0
	for _, ip := range svc.lbVIPs {
		if svc.hasEndpoints {
			out.elems = append(out.elems, elemSpec{c: cServiceIPs, key: dest(ip), value: "goto " + svc.externalChain})
		}
		if usesFirewall {
			out.elems = append(out.elems, elemSpec{c: cFirewallIPs, key: dest(ip), value: "goto " + svc.firewallChain})
		}
	}
	if !hasExternal {
		for _, ip := range svc.lbVIPs {
			out.elems = append(out.elems, elemSpec{c: cNoEndpointServices, key: dest(ip), value: externalVerdict, comment: comment})
		}
	}

	if svc.nodePort != 0 {
		npKey := svc.protocol + " . " + strconv.Itoa(svc.nodePort)
		if svc.rejectLocalhostNodePort {
			out.elems = append(out.elems, elemSpec{c: cLocalhostReject, key: npKey, value: "goto " + localhostNodePortRejectChainName(v1.Protocol(svc.protocol))})
		}
		if svc.hasEndpoints {
			// NodePorts are deliberately not subject to loadBalancerSourceRanges.
			out.elems = append(out.elems, elemSpec{c: cServiceNodePorts, key: npKey, value: "goto " + svc.externalChain})
		}
		if !hasExternal {
			out.elems = append(out.elems, elemSpec{c: cNoEndpointNodePorts, key: npKey, value: externalVerdict, comment: comment})
		}
	}

	if usesFirewall {
		var sources []string
		allowFromNode := false
		for _, cidr := range svc.sourceRanges {
			if len(sources) > 0 {
				sources = append(sources, ",")
			}
			sources = append(sources, cidr.String())
			if g.nodeIP != nil && cidr.Contains(g.nodeIP) {
				allowFromNode = true
			}
		}
		// A VIP-style LB IP is often also a local address, so node-originated
		// requests loop back with the VIP as source; let those through.
		if allowFromNode {
			for _, ip := range svc.lbVIPs {
				sources = append(sources, ",", ip)
			}
		}
		out.chains = append(out.chains, chainSpec{
			name:  svc.firewallChain,
			rules: []ruleSpec{{rule: knftables.Concat(g.ipX, "saddr", "!=", "{", sources, "}", "drop")}},
		})
	}
	return out
}

// slotSource hands out endpoint map slots (the view, within the current
// generation).
type slotSource interface {
	reserveSlots(chain, protocol string, n int) (mapName string, mapIndex int, base uint32)
}

// maxRuleBalancedEndpoints is the largest endpoint count of a service with
// session affinity balanced with one rule per endpoint; above it a single
// numgen vmap rule is used (upstream's only form).
//
// Why rules: each numgen vmap is an anonymous set, and the kernel finds sets
// by walking the table's set list, so loading N of them costs O(N^2) in the
// kernel. Rule i matches with probability 1/(n-i) given the earlier ones did
// not, so every endpoint is picked with probability 1/n, exactly like the map.
const maxRuleBalancedEndpoints = 64

// endpointRules writes the load-balancing rules of policy chain and, without
// session affinity, records the endpoint map slots they read in out.slots.
func (g *generator) endpointRules(svc *serviceModel, chain string, eps []*endpointModel, slots slotSource, out *serviceRules) []ruleSpec {
	n := len(eps)
	if !svc.affinity {
		if g.inlineMaps {
			return []ruleSpec{{rule: g.inlineMapRule(svc, eps)}}
		}
		mapName, mi, base := slots.reserveSlots(chain, svc.protocol, n)
		values := make([]string, n)
		for i, ep := range eps {
			values[i] = ep.ip + " . " + strconv.Itoa(ep.port)
		}
		out.slots = append(out.slots, slotSpec{chain: chain, mapIndex: mi, base: base, values: values})
		return []ruleSpec{{rule: "meta l4proto " + svc.protocol + " dnat " + g.ipX + " addr . port to numgen random mod " +
			strconv.Itoa(n) + " offset " + strconv.FormatUint(uint64(base), 10) + " map @" + mapName}}
	}
	rules := make([]ruleSpec, 0, 2*n)
	for _, ep := range eps {
		rules = append(rules, ruleSpec{rule: g.ipX + " saddr @" + ep.affinitySet() + " goto " + ep.chain()})
	}
	if n > g.ruleBalanceMax && n > 1 {
		vmap := make([]string, n)
		for i, ep := range eps {
			vmap[i] = strconv.Itoa(i) + " : goto " + ep.chain()
		}
		return append(rules, ruleSpec{rule: "numgen random mod " + strconv.Itoa(n) + " vmap { " + strings.Join(vmap, " , ") + " }"})
	}
	for i, ep := range eps {
		rule := "goto " + ep.chain()
		if k := n - i; k > 1 {
			rule = "numgen random mod " + strconv.Itoa(k) + " 0 " + rule
		}
		rules = append(rules, ruleSpec{rule: rule})
	}
	return rules
}

// inlineMapRule is upstream's form of load balancing, one anonymous map per
// chain (see generator.inlineMaps).
func (g *generator) inlineMapRule(svc *serviceModel, eps []*endpointModel) string {
	items := make([]string, len(eps))
	for i, ep := range eps {
		items[i] = strconv.Itoa(i) + " : " + ep.ip + " . " + strconv.Itoa(ep.port)
	}
	return "meta l4proto " + svc.protocol + " dnat " + g.ipX + " addr . port to numgen random mod " +
		strconv.Itoa(len(eps)) + " map { " + strings.Join(items, " , ") + " }"
}

// verdictFor is the no-endpoint-services verdict for traffic the brain
// decided not to forward.
func verdictFor(a proxy.NoEndpointsAction) string {
	switch a {
	case proxy.Reject:
		return "goto " + rejectChain
	case proxy.Drop:
		return "drop"
	}
	return ""
}
