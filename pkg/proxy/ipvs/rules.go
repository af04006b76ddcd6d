//go:build linux

package ipvs

import (
	"bytes"
	"slices"

	v1 "k8s.io/api/core/v1"

	utilipset "k8s.io/net-utils/ipset"
	utiliptables "k8s.io/net-utils/iptables"
)

// iptablesRules renders the nat and filter rules of IPVS mode, as upstream
// writes them: jumps on the sets that are not empty, masquerading, the
// firewall for load balancer source ranges and the filters that keep VIPs
// from exposing host ports.
func (p *Proxier) iptablesRules() []byte {
	st := p.st
	var nat, filter bytes.Buffer
	line := func(b *bytes.Buffer, words ...string) {
		for i, w := range words {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(w)
		}
		b.WriteByte('\n')
	}
	nonEmpty := func(id setID) bool { return len(st.setRefs[id]) > 0 }
	name := func(id setID) string { return p.sets[id].Name }

	nat.WriteString("*nat\n")
	filter.WriteString("*filter\n")
	for _, ch := range iptablesChains {
		if ch.Table == utiliptables.TableNAT {
			nat.WriteString(utiliptables.MakeChainLine(ch.Chain) + "\n")
		} else {
			filter.WriteString(utiliptables.MakeChainLine(ch.Chain) + "\n")
		}
	}

	// Connections from localhost never reach a service here.
	lo := "127.0.0.0/8"
	if p.ipFamily == v1.IPv6Protocol {
		lo = "::1/128"
	}
	line(&nat, "-A", string(kubeServicesChain), "-s", lo, "-j", "RETURN")

	for _, j := range setJumps {
		if !nonEmpty(j.set) {
			continue
		}
		b := &nat
		if j.table == utiliptables.TableFilter {
			b = &filter
		}
		args := []string{"-A", string(j.from)}
		if j.protocolMatch != "" {
			args = append(args, "-p", j.protocolMatch)
		}
		args = append(args, "-m", "comment", "--comment", p.sets[j.set].comment(),
			"-m", "set", "--match-set", name(j.set), j.matchType, "-j", j.to)
		line(b, args...)
	}

	if nonEmpty(setClusterIP) {
		args := []string{"-A", string(kubeServicesChain), "-m", "comment", "--comment", p.sets[setClusterIP].comment(),
			"-m", "set", "--match-set", name(setClusterIP)}
		switch {
		case p.masqueradeAll:
			line(&nat, append(args, "dst,dst", "-j", string(kubeMarkMasqChain))...)
		case p.localDetector.IsImplemented():
			// Off-cluster traffic to a service VIP (a static route for the
			// service range to any node) may bounce off-node: masquerade it.
			args = append(args, "dst,dst")
			args = append(args, p.localDetector.IfNotLocal()...)
			line(&nat, append(args, "-j", string(kubeMarkMasqChain))...)
		default:
			// The node's own connections to a VIP get the VIP (on
			// kube-ipvs0) as source: masquerade traffic from a service IP.
			line(&nat, append(args, "src,dst", "-j", string(kubeMarkMasqChain))...)
		}
	}

	externalIPRules := func(args []string) {
		// Only traffic from off the machine (not from a bridge, not from a
		// local address), or to an external IP that is also local.
		line(&nat, append(slices.Clone(args), "-m", "physdev", "!", "--physdev-is-in",
			"-m", "addrtype", "!", "--src-type", "LOCAL", "-j", "ACCEPT")...)
		line(&nat, append(slices.Clone(args), "-m", "addrtype", "--dst-type", "LOCAL", "-j", "ACCEPT")...)
	}
	if nonEmpty(setExternalIP) {
		args := []string{"-A", string(kubeServicesChain), "-m", "comment", "--comment", p.sets[setExternalIP].comment(),
			"-m", "set", "--match-set", name(setExternalIP), "dst,dst"}
		line(&nat, append(slices.Clone(args), "-j", string(kubeMarkMasqChain))...)
		externalIPRules(args)
	}
	if nonEmpty(setExternalIPLocal) {
		externalIPRules([]string{"-A", string(kubeServicesChain), "-m", "comment", "--comment", p.sets[setExternalIPLocal].comment(),
			"-m", "set", "--match-set", name(setExternalIPLocal), "dst,dst"})
	}

	line(&nat, "-A", string(kubeServicesChain), "-m", "addrtype", "--dst-type", "LOCAL", "-j", string(kubeNodePortChain))
	line(&nat, "-A", string(kubeLoadBalancerChain), "-j", string(kubeMarkMasqChain))
	line(&filter, "-A", string(kubeSourceRangesFirewallChain), "-j", "DROP")

	outFilter := make([]string, 0, len(st.outFilter))
	for l := range st.outFilter {
		outFilter = append(outFilter, l)
	}
	slices.Sort(outFilter)
	for _, l := range outFilter {
		filter.WriteString(l)
		filter.WriteByte('\n')
	}

	// Accept what IPVS will take, in case later rules would drop it; these
	// must end KUBE-SERVICES.
	for _, id := range []setID{setClusterIP, setLoadBalancer} {
		if nonEmpty(id) {
			match := "dst,dst"
			if p.sets[id].SetType == utilipset.BitmapPort {
				match = "dst"
			}
			line(&nat, "-A", string(kubeServicesChain), "-m", "set", "--match-set", name(id), match, "-j", "ACCEPT")
		}
	}

	mark := p.masqueradeMark + "/" + p.masqueradeMark
	// Marked traffic is forwarded even if FORWARD's policy is not ACCEPT.
	line(&filter, "-A", string(kubeForwardChain), "-m", "comment", "--comment", `"kubernetes forwarding rules"`,
		"-m", "mark", "--mark", mark, "-j", "ACCEPT")
	line(&filter, "-A", string(kubeForwardChain), "-m", "comment", "--comment", `"kubernetes forwarding conntrack rule"`,
		"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
	line(&filter, "-A", string(kubeNodePortChain), "-m", "comment", "--comment", p.sets[setHealthCheckNodePort].comment(),
		"-m", "set", "--match-set", name(setHealthCheckNodePort), "dst", "-j", "ACCEPT")

	// New connections to a kube-ipvs0 address are only let in for service
	// ports (https://issues.k8s.io/72236).
	for _, id := range []setID{setLoadBalancer, setClusterIP, setExternalIP, setExternalIPLocal} {
		line(&filter, "-A", string(kubeIPVSFilterChain), "-m", "set", "--match-set", name(id), "dst,dst", "-j", "RETURN")
	}
	line(&filter, "-A", string(kubeIPVSFilterChain), "-m", "set", "--match-set", name(setHealthCheckNodePort), "dst", "-j", "RETURN")
	line(&filter, "-A", string(kubeIPVSFilterChain), "-m", "conntrack", "--ctstate", "NEW",
		"-m", "set", "--match-set", name(setIPVS), "dst", "-j", "REJECT")

	line(&nat, "-A", string(kubePostroutingChain), "-m", "mark", "!", "--mark", mark, "-j", "RETURN")
	// Clear the mark so a packet traversing the stack again is not
	// masqueraded twice.
	line(&nat, "-A", string(kubePostroutingChain), "-j", "MARK", "--xor-mark", p.masqueradeMark)
	line(&nat, "-A", string(kubePostroutingChain), "-m", "comment", "--comment", `"kubernetes service traffic requiring SNAT"`,
		"-j", "MASQUERADE", "--random-fully")
	line(&nat, "-A", string(kubeMarkMasqChain), "-j", "MARK", "--or-mark", p.masqueradeMark)

	nat.WriteString("COMMIT\n")
	filter.WriteString("COMMIT\n")
	nat.Write(filter.Bytes())
	return nat.Bytes()
}
