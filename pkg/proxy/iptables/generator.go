//go:build linux

package iptables

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	utiliptables "k8s.io/net-utils/iptables"
)

// generator turns the proxier's settings and each service port's node-local
// model (pkg/proxy/localnode) into iptables-restore lines. It reads no kernel state and
// remembers nothing of earlier syncs (beyond a memo of probability strings),
// so what it writes depends only on its arguments and fields.
type generator struct {
	ipv6                bool
	masqueradeAll       bool
	masqueradeMark      string // "0x00004000"
	masqueradeMatch     string // "0x00004000/0x00004000"
	randomFully         bool
	localDetector       proxyutil.LocalTrafficDetector
	nodeIP              net.IP
	localhostNodePorts  bool
	conntrackTCPLiberal bool
	// allNodePorts: nodePortAddresses matches every local address, so one
	// addrtype rule leads to KUBE-NODEPORTS instead of one per address.
	allNodePorts bool
	logger       klog.Logger

	// large drops per-endpoint comments (upstream's large cluster mode).
	large bool
	// counters says which nfacct counters exist for rules to count into.
	counters nfacctCounters

	probabilities []string
}

// nfacctCounters says which of the nfacct counters the rules use exist.
type nfacctCounters struct {
	invalidDropped    bool // metrics.IPTablesCTStateInvalidDroppedNFAcctCounter
	localhostAccepted bool // metrics.LocalhostNodePortAcceptedNFAcctCounter
}

// tables is one sync's restore input in the pieces the sync chooses from.
// natChains and natRules start with the top-level chains' declarations and
// fixed rules (the first natTopChains and natTopRules bytes, natTopLines
// rules), followed by the re-rendered service ports' own chains; dispatch
// holds every port's rules in KUBE-SERVICES and KUBE-NODEPORTS.
type tables struct {
	filterChains, filterRules ruleBuf
	natChains, natRules       ruleBuf
	dispatch                  ruleBuf
	// edits, when a partial sync edits the dispatch chains in place
	// (edits.go), are its "-D" and "-I" lines; editInserts counts the "-I".
	edits       ruleBuf
	editInserts int

	natTopChains, natTopRules, natTopLines int

	// runs partitions the ports' rules in natRules (after natTopRules) by
	// chain, in rendering order, for sortedRules; a port's chain may have
	// several runs (SVC: its masquerade rule, then the cascade after EXT's).
	runs []chainRun

	// decls is scratch space for sortedDecls, kept across syncs.
	decls [][]byte
}

// chainRun is a stretch of natRules holding rules of one chain only; end is
// -1 while rules may still be added to it.
type chainRun struct {
	// prefix is the chain name's first 16 bytes (namePrefix): sorting
	// compares integers held in the run and reads a name only when they are
	// equal, which is rare. Sorting the 10k-Service bench's 130k runs took
	// ~63 ms by name alone, ~38 ms this way.
	prefix     [2]uint64
	chain      utiliptables.Chain
	start, end int
}

// namePrefix is the first 16 bytes of name, zero-padded, as two
// big-endian words: comparing prefixes, then names if equal, is byte order.
func namePrefix(name utiliptables.Chain) [2]uint64 {
	var b [16]byte
	copy(b[:], name)
	return [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func (a chainRun) compare(b chainRun) int {
	// Not cmp.Or, which would compare the names every time.
	if a.prefix != b.prefix {
		if a.prefix[0] != b.prefix[0] {
			return cmp.Compare(a.prefix[0], b.prefix[0])
		}
		return cmp.Compare(a.prefix[1], b.prefix[1])
	}
	if c := strings.Compare(string(a.chain), string(b.chain)); c != 0 {
		return c
	}
	return cmp.Compare(a.start, b.start)
}

// reserve sizes the nat buffers for a full sync of ports with endpoints in
// all, from what the rules measure: ~275 bytes of rules and ~40 of chain
// declaration per endpoint, service chains included (1k Services × 10
// endpoints: 2.7 MB and 0.39 MB). Grown by appending instead, they cost a
// cold start ~5 ms of copying at 1k and left up to half their size as
// garbage.
func (t *tables) reserve(ports, endpoints int) {
	t.natRules.b = slices.Grow(t.natRules.b[:0], 300*(endpoints+ports))
	t.natChains.b = slices.Grow(t.natChains.b[:0], 48*(endpoints+3*ports))
	t.runs = slices.Grow(t.runs[:0], endpoints+3*ports)
}

// release drops, before a partial sync, the nat buffers a large full sync
// grew: they held every port's chains (~30 MB at 10k Services), and a
// partial sync writes a few.
func (t *tables) release() {
	if cap(t.natRules.b)+cap(t.natChains.b) > keptRestoreBytes {
		t.natRules.b, t.natChains.b, t.runs = nil, nil, nil
	}
}

// portRules is what one service port contributed to a sync.
type portRules struct {
	info *servicePortInfo

	// filter holds the port's rules in the top-level filter chains and
	// dispatch its rules in the top-level nat chains (KUBE-SERVICES,
	// KUBE-NODEPORTS); both are part of every restore that writes them.
	filter, dispatch ruleBuf
	// chains are the port's own nat chains; ownRules counts their rules,
	// which are written only when the port is re-rendered. counts[i] is
	// how many of them chains[i] holds: the drift check (drift.go) compares
	// it with the kernel's, since the rules themselves are not kept.
	chains   []utiliptables.Chain
	counts   []int32
	ownRules int

	// model is what the port was last rendered from, kept so that an
	// unchanged port is not converted again and endpoints that stay keep
	// their strings. A pointer keeps portRules small: partial syncs walk
	// every port's rules, and only re-rendered ones need the model.
	model *portModel
}

// probability returns the --probability argument for choosing one of n
// remaining endpoints; formatting floats is slow, so values are memoized.
func (g *generator) probability(n int) string {
	if len(g.probabilities) == 0 {
		g.probabilities = append(g.probabilities, "<bad value>")
	}
	for i := len(g.probabilities); i <= n; i++ {
		g.probabilities = append(g.probabilities, strconv.FormatFloat(1.0/float64(i), 'f', 10, 64))
	}
	return g.probabilities[n]
}

// begin resets t and writes the top-level chains' declarations and the
// rules that do not depend on any Service.
func (g *generator) begin(t *tables) {
	t.filterChains.reset()
	t.filterRules.reset()
	t.natChains.reset()
	t.natRules.reset()
	t.runs = t.runs[:0]
	t.dispatch.reset()
	t.edits.reset()
	t.editInserts = 0

	for _, c := range filterTopChains {
		t.filterChains.chainLine(c)
	}
	for _, c := range natTopChains {
		t.natChains.chainLine(c)
	}

	// Packets marked by KUBE-MARK-MASQ are masqueraded on the way out; the
	// mark is cleared first so a packet re-entering the stack is not
	// masqueraded twice.
	nr := &t.natRules
	nr.line("-A", string(kubePostroutingChain), "-m", "mark", "!", "--mark", g.masqueradeMatch, "-j", "RETURN")
	nr.line("-A", string(kubePostroutingChain), "-j", "MARK", "--xor-mark", g.masqueradeMark)
	nr.start("-A", string(kubePostroutingChain), "-m", "comment", "--comment", `"kubernetes service traffic requiring SNAT"`, "-j", "MASQUERADE")
	if g.randomFully {
		nr.more("--random-fully")
	}
	nr.end()
	nr.line("-A", string(kubeMarkMasqChain), "-j", "MARK", "--or-mark", g.masqueradeMark)
	t.natTopChains, t.natTopRules, t.natTopLines = len(t.natChains.b), len(nr.b), nr.lines

	if !g.ipv6 && g.localhostNodePorts {
		// route_localnet lets remote hosts reach 127.0.0.0/8 on this node
		// (https://issue.k8s.io/90259); only DNATed replies may use it. The
		// same rule is created by kubelet and must stay identical to it.
		t.filterChains.chainLine(kubeletFirewallChain)
		t.filterRules.line("-A", string(kubeletFirewallChain), "-m", "comment", "--comment", `"block incoming localnet connections"`,
			"-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP")
	}
}

// end writes the rules that must follow every service port's: the jump to
// KUBE-NODEPORTS last in KUBE-SERVICES (so service IPs that are also node
// IPs match their own rules first) and KUBE-FORWARD. nodeIPs are the
// addresses NodePorts are served on, unless allNodePorts.
func (g *generator) end(t *tables, nodeIPs []net.IP) {
	const comment = `"kubernetes service nodeports; NOTE: this must be the last rule in this chain"`
	d := &t.dispatch
	if g.allNodePorts {
		d.start("-A", string(kubeServicesChain), "-m", "comment", "--comment", comment, "-m", "addrtype", "--dst-type", "LOCAL")
		// Loopback NodePorts never work for IPv6 and for IPv4 only with
		// route_localnet.
		if g.ipv6 {
			d.more("!", "-d", "::1/128")
		} else if !g.localhostNodePorts {
			d.more("!", "-d", "127.0.0.0/8")
		}
		d.more("-j", string(kubeNodePortsChain))
		d.end()
	}
	for _, ip := range nodeIPs {
		if ip.IsLoopback() && g.ipv6 {
			g.logger.Error(nil, "--nodeport-addresses includes localhost but localhost NodePorts are not supported on IPv6", "address", ip.String())
			continue
		} else if ip.IsLoopback() && !g.localhostNodePorts {
			g.logger.Error(nil, "--nodeport-addresses includes localhost but --iptables-localhost-nodeports=false was passed", "address", ip.String())
			continue
		}
		d.line("-A", string(kubeServicesChain), "-m", "comment", "--comment", comment, "-d", ip.String(), "-j", string(kubeNodePortsChain))
	}

	f := &t.filterRules
	// Without be_liberal, conntrack may declare packets of a healthy
	// connection INVALID; forwarded, they would reach the endpoint un-DNATed
	// and be answered with a RST (issues 74839, 117924).
	if !g.conntrackTCPLiberal {
		f.start("-A", string(kubeForwardChain), "-m", "conntrack", "--ctstate", "INVALID")
		if g.counters.invalidDropped {
			f.more("-m", "nfacct", "--nfacct-name", metrics.IPTablesCTStateInvalidDroppedNFAcctCounter)
		}
		f.more("-j", "DROP")
		f.end()
	}
	// Accept what we marked for masquerading, so NodePort traffic is
	// forwarded even under a DROP FORWARD policy, and its replies.
	f.line("-A", string(kubeForwardChain), "-m", "comment", "--comment", `"kubernetes forwarding rules"`,
		"-m", "mark", "--mark", g.masqueradeMatch, "-j", "ACCEPT")
	f.line("-A", string(kubeForwardChain), "-m", "comment", "--comment", `"kubernetes forwarding conntrack rule"`,
		"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
}

// portShape is what the node-local model makes of one service port:
// which of its own chains exist and where each kind of traffic goes.
type portShape struct {
	info *servicePortInfo
	m    *portModel

	internalChain       utiliptables.Chain // SVC or SVL, for cluster IP traffic
	externalPolicyChain utiliptables.Chain // SVC or SVL, behind the EXT chain
	lbChain             utiliptables.Chain // EXT, or FW with source ranges
	forwardInternal     bool               // cluster IP traffic has endpoints
	forwardExternal     bool               // external traffic has endpoints
	usesExtChain        bool
	usesFWChain         bool
	lbVIPs              []net.IP

	// Filter-table verdicts for traffic the policy does not forward.
	internalTarget, internalComment string
	externalTarget, externalComment string
}

func shapeOf(info *servicePortInfo, m *portModel) portShape {
	hasEndpoints := m.ln.HasAnyEndpoints
	s := portShape{
		info:                info,
		m:                   m,
		internalChain:       info.clusterPolicyChain,
		externalPolicyChain: info.clusterPolicyChain,
		lbChain:             info.externalChain,
		forwardInternal:     m.internal == proxy.Forward,
		forwardExternal:     m.external == proxy.Forward,
		// The EXT chain is needed whenever anything is reachable, even with
		// no externally usable endpoints: it short-circuits pod and host
		// traffic.
		usesExtChain: hasEndpoints && info.ExternallyAccessible(),
		lbVIPs:       info.LoadBalancerVIPs(),
	}
	if m.ln.InternalPolicy == localnode.PolicyLocal {
		s.internalChain = info.localPolicyChain
	}
	if m.ln.ExternalPolicy == localnode.PolicyLocal {
		s.externalPolicyChain = info.localPolicyChain
	}
	s.usesFWChain = hasEndpoints && len(s.lbVIPs) > 0 && len(info.LoadBalancerSourceRanges()) > 0
	if s.usesFWChain {
		s.lbChain = info.firewallChain
	}
	// With no endpoints at all the filter table rejects, so clients fail
	// fast instead of timing out; with endpoints only elsewhere it drops.
	s.internalTarget, s.internalComment = info.filterVerdict(m.internal)
	s.externalTarget, s.externalComment = info.filterVerdict(m.external)
	return s
}

// servicePort renders r from scratch for one service port: its rules in the
// top-level chains go to r.filter and r.dispatch, its own chains to
// t.natChains and t.natRules, from the port's node-local model m. A port
// without one (ValidServicePort refused it) gets no rules, so all its chains
// become stale.
func (g *generator) servicePort(t *tables, r *portRules, info *servicePortInfo, m *portModel) {
	r.info = info
	r.filter.reset()
	r.dispatch.reset()
	r.chains = r.chains[:0]
	r.counts = r.counts[:0]
	r.ownRules = 0
	if info == nil || m == nil {
		return
	}
	s := shapeOf(info, m)
	g.frontends(r, &s)
	before, firstRun := t.natRules.lines, len(t.runs)
	g.ownChains(t, r, &s)
	r.ownRules = t.natRules.lines - before
	r.countRules(t, firstRun)
}

// countRules sets r.counts from the runs the port's rendering added to t,
// starting at runs[first]. The last run is still open: it ends at the end
// of natRules.
func (r *portRules) countRules(t *tables, first int) {
	r.counts = slices.Grow(r.counts[:0], len(r.chains))[:len(r.chains)]
	clear(r.counts)
	for i := first; i < len(t.runs); i++ {
		end := len(t.natRules.b)
		if i+1 < len(t.runs) {
			end = t.runs[i+1].start
		}
		if j := slices.Index(r.chains, t.runs[i].chain); j >= 0 {
			r.counts[j] += int32(bytes.Count(t.natRules.b[t.runs[i].start:end], newline))
		}
	}
}

var newline = []byte{'\n'}

// frontends writes the port's rules in the top-level chains: where traffic
// to each of its addresses goes (dispatch) and how the filter table refuses
// what has no endpoint to go to.
func (g *generator) frontends(r *portRules, s *portShape) {
	info, proto, port := s.info, s.info.protocol, s.info.port
	hasEndpoints := s.m.ln.HasAnyEndpoints
	d, f := &r.dispatch, &r.filter

	if s.forwardInternal {
		d.line("-A", string(kubeServicesChain), "-m", "comment", "--comment", info.commentClusterIP,
			"-m", proto, "-p", proto, "-d", info.clusterIP, "--dport", port, "-j", string(s.internalChain))
	} else {
		f.line("-A", string(kubeServicesChain), "-m", "comment", "--comment", s.internalComment,
			"-m", proto, "-p", proto, "-d", info.clusterIP, "--dport", port, "-j", s.internalTarget)
	}

	for _, ip := range info.ExternalIPs() {
		ips := ip.String()
		if hasEndpoints {
			d.line("-A", string(kubeServicesChain), "-m", "comment", "--comment", info.commentExternalIP,
				"-m", proto, "-p", proto, "-d", ips, "--dport", port, "-j", string(info.externalChain))
		}
		if !s.forwardExternal {
			// Traffic the EXT chain did not short-circuit ends here.
			f.line("-A", string(kubeExternalServicesChain), "-m", "comment", "--comment", s.externalComment,
				"-m", proto, "-p", proto, "-d", ips, "--dport", port, "-j", s.externalTarget)
		}
	}

	for _, ip := range s.lbVIPs {
		ips := ip.String()
		if hasEndpoints {
			d.line("-A", string(kubeServicesChain), "-m", "comment", "--comment", info.commentLBIP,
				"-m", proto, "-p", proto, "-d", ips, "--dport", port, "-j", string(s.lbChain))
		}
		if s.usesFWChain {
			f.line("-A", string(kubeProxyFirewallChain), "-m", "comment", "--comment", info.commentFWDrop,
				"-m", proto, "-p", proto, "-d", ips, "--dport", port, "-j", "DROP")
		}
	}
	if !s.forwardExternal {
		for _, ip := range s.lbVIPs {
			f.line("-A", string(kubeExternalServicesChain), "-m", "comment", "--comment", s.externalComment,
				"-m", proto, "-p", proto, "-d", ip.String(), "--dport", port, "-j", s.externalTarget)
		}
	}

	// loadBalancerSourceRanges do not apply to the NodePort, as upstream.
	if info.NodePort() != 0 {
		g.nodePort(r, s)
	}

	// Health check node port: accepted whether or not there are local
	// endpoints, since answering "no" is the point.
	if info.HealthCheckNodePort() != 0 {
		f.line("-A", string(kubeNodePortsChain), "-m", "comment", "--comment", info.commentHC,
			"-m", "tcp", "-p", "tcp", "--dport", info.hcNodePort, "-j", "ACCEPT")
	}
}

func (g *generator) nodePort(r *portRules, s *portShape) {
	info, proto := s.info, s.info.protocol
	if s.m.ln.HasAnyEndpoints {
		if g.localhostNodePorts && !g.ipv6 && g.counters.localhostAccepted {
			r.dispatch.line("-A", string(kubeNodePortsChain), "-m", "comment", "--comment", info.nameString,
				"-m", proto, "-p", proto, "-d", "127.0.0.0/8", "--dport", info.nodePort,
				"-m", "nfacct", "--nfacct-name", metrics.LocalhostNodePortAcceptedNFAcctCounter, "-j", string(info.externalChain))
		}
		r.dispatch.line("-A", string(kubeNodePortsChain), "-m", "comment", "--comment", info.nameString,
			"-m", proto, "-p", proto, "--dport", info.nodePort, "-j", string(info.externalChain))
	}
	if !s.forwardExternal {
		r.filter.line("-A", string(kubeExternalServicesChain), "-m", "comment", "--comment", s.externalComment,
			"-m", "addrtype", "--dst-type", "LOCAL", "-m", proto, "-p", proto, "--dport", info.nodePort, "-j", s.externalTarget)
	}
}

// rulesOf returns the buffer a port's rules in its own chain c go to, noting
// where they start (tables.runs).
func (t *tables) rulesOf(c utiliptables.Chain) *ruleBuf {
	at := len(t.natRules.b)
	if n := len(t.runs); n > 0 {
		t.runs[n-1].end = at
	}
	t.runs = append(t.runs, chainRun{prefix: namePrefix(c), chain: c, start: at, end: -1})
	return &t.natRules
}

// declare adds one of the port's own chains to the restore input.
func (r *portRules) declare(t *tables, c utiliptables.Chain) {
	t.natChains.chainLine(c)
	r.chains = append(r.chains, c)
}

// ownChains writes the port's own chains: EXT, FW, SVC/SVL and SEP.
func (g *generator) ownChains(t *tables, r *portRules, s *portShape) {
	info := s.info
	if s.forwardInternal {
		g.clusterIPMasquerade(t.rulesOf(s.internalChain), s)
	}
	if s.usesExtChain {
		r.declare(t, info.externalChain)
		g.externalChain(t.rulesOf(info.externalChain), s)
	}
	if s.usesFWChain {
		r.declare(t, info.firewallChain)
		g.firewallChain(t.rulesOf(info.firewallChain), s)
	}
	if len(s.m.cluster) > 0 {
		r.declare(t, info.clusterPolicyChain)
		g.policyChain(t.rulesOf(info.clusterPolicyChain), s.m, info.clusterPolicyChain, s.m.cluster)
	}
	if len(s.m.local) > 0 {
		r.declare(t, info.localPolicyChain)
		g.policyChain(t.rulesOf(info.localPolicyChain), s.m, info.localPolicyChain, s.m.local)
	}
	g.endpointChains(t, r, info, s.m)
}

// clusterIPMasquerade marks cluster IP traffic for masquerading when it
// comes from outside the cluster (or always, with masqueradeAll).
func (g *generator) clusterIPMasquerade(nr *ruleBuf, s *portShape) {
	info, proto := s.info, s.info.protocol
	if g.masqueradeAll {
		nr.line("-A", string(s.internalChain), "-m", "comment", "--comment", info.commentClusterIP,
			"-m", proto, "-p", proto, "-d", info.clusterIP, "--dport", info.port, "-j", string(kubeMarkMasqChain))
	} else if g.localDetector.IsImplemented() {
		// Off-cluster clients routed to the service range via this node
		// may be answered from another node, so they are masqueraded.
		nr.start("-A", string(s.internalChain), "-m", "comment", "--comment", info.commentClusterIP,
			"-m", proto, "-p", proto, "-d", info.clusterIP, "--dport", info.port)
		nr.more(g.localDetector.IfNotLocal()...)
		nr.more("-j", string(kubeMarkMasqChain))
		nr.end()
	}
}

func (g *generator) externalChain(nr *ruleBuf, s *portShape) {
	info, ext := s.info, string(s.info.externalChain)
	if s.m.ln.ExternalPolicy != localnode.PolicyLocal {
		// Endpoints may be on other nodes; replies must come back here.
		nr.line("-A", ext, "-m", "comment", "--comment", info.commentMasqExt, "-j", string(kubeMarkMasqChain))
	} else {
		if g.localDetector.IsImplemented() {
			// Pods reaching an external address behave as if they went
			// out to the load balancer and came back: no traffic policy.
			nr.start("-A", ext, "-m", "comment", "--comment", info.commentPodExt)
			nr.more(g.localDetector.IfLocal()...)
			nr.more("-j", string(info.clusterPolicyChain))
			nr.end()
		}
		// The host itself would use the (local) external IP as source,
		// which the endpoint cannot answer, so masquerade and use any
		// endpoint.
		nr.line("-A", ext, "-m", "comment", "--comment", info.commentMasqLocal,
			"-m", "addrtype", "--src-type", "LOCAL", "-j", string(kubeMarkMasqChain))
		nr.line("-A", ext, "-m", "comment", "--comment", info.commentRouteLocal,
			"-m", "addrtype", "--src-type", "LOCAL", "-j", string(info.clusterPolicyChain))
	}
	if s.forwardExternal {
		nr.line("-A", ext, "-j", string(s.externalPolicyChain))
	}
}

func (g *generator) firewallChain(nr *ruleBuf, s *portShape) {
	info, fw, ext := s.info, string(s.info.firewallChain), string(s.info.externalChain)
	allowFromNode := false
	for _, cidr := range info.LoadBalancerSourceRanges() {
		nr.line("-A", fw, "-m", "comment", "--comment", info.commentLBIP, "-s", cidr.String(), "-j", ext)
		if g.nodeIP != nil && cidr.Contains(g.nodeIP) {
			allowFromNode = true
		}
	}
	// A VIP routed locally makes the node's own requests arrive with the
	// VIP as source; allow them if the node is allowed.
	if allowFromNode {
		for _, ip := range s.lbVIPs {
			nr.line("-A", fw, "-m", "comment", "--comment", info.commentLBIP, "-s", ip.String(), "-j", ext)
		}
	}
	// Falling off the end leaves the packet un-DNATed, and
	// KUBE-PROXY-FIREWALL drops it. The rule only makes that visible.
	nr.line("-A", fw, "-m", "comment", "--comment", info.commentFWOther)
}

// endpointChains writes one SEP chain per reachable endpoint.
func (g *generator) endpointChains(t *tables, r *portRules, info *servicePortInfo, m *portModel) {
	proto := info.protocol
	affinity := m.ln.SessionAffinity == localnode.AffinityClientIP
	for i := range m.reachable {
		ep := &m.reachable[i]
		c := ep.chain
		r.declare(t, c)
		nr := t.rulesOf(c)
		// Hairpin: an endpoint reaching itself through the service must be
		// masqueraded or it would answer itself directly.
		g.startRule(nr, c, info.nameString)
		nr.more("-s", ep.ip, "-j", string(kubeMarkMasqChain))
		nr.end()
		g.startRule(nr, c, info.nameString)
		if affinity {
			nr.more("-m", "recent", "--name", string(c), "--set")
		}
		nr.more("-m", proto, "-p", proto, "-j", "DNAT", "--to-destination", ep.endpoint)
		nr.end()
	}
}

// policyChain fills a SVC or SVL chain: first the affinity checks, then a
// cascade of random matches giving each endpoint an equal share.
func (g *generator) policyChain(nr *ruleBuf, m *portModel, chain utiliptables.Chain, endpoints []*sepInfo) {
	if m.ln.SessionAffinity == localnode.AffinityClientIP {
		seconds := strconv.FormatInt(int64(m.ln.AffinityTimeout/time.Second), 10)
		for _, ep := range endpoints {
			g.startRule(nr, chain, ep.comment)
			nr.more("-m", "recent", "--name", string(ep.chain), "--rcheck", "--seconds", seconds, "--reap", "-j", string(ep.chain))
			nr.end()
		}
	}
	n := len(endpoints)
	for i, ep := range endpoints {
		g.startRule(nr, chain, ep.comment)
		if i < n-1 {
			nr.more("-m", "statistic", "--mode", "random", "--probability", g.probability(n-i))
		}
		nr.more("-j", string(ep.chain))
		nr.end()
	}
}

// startRule begins a rule in chain with comment, which large clusters leave
// out.
func (g *generator) startRule(nr *ruleBuf, chain utiliptables.Chain, comment string) {
	nr.start("-A", string(chain))
	if !g.large {
		nr.more("-m", "comment", "--comment", comment)
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

// sortedDecls appends the chain declaration lines of decls to dst in byte
// order. legacy iptables-restore (libiptc) keeps a table's chains in a
// sorted list that it indexes in buckets and re-indexes as chains are
// created; declarations that arrive in order are far cheaper to insert than
// the ports' chains in rendering order, whose names are hashes. Measured on
// iptables 1.8.9 with the 10k-Service bench input (112k chains, 326k
// rules), loaded into an empty namespace: 9.9 s as rendered, 6.9 s sorted,
// 6.1 s for iptables-save's output of the same table (which also declares
// its chains in order; the rest of that gap was the rules' order, which
// sortedRules closes). Sorting costs ~20 ms of our time at that size.
// What a restore creates, flushes and fills is the same in any order; a
// split restore (chunks.go) keeps its own.
func (t *tables) sortedDecls(dst, decls []byte) []byte {
	t.decls = t.decls[:0]
	for len(decls) > 0 {
		end := bytes.IndexByte(decls, '\n') + 1
		if end == 0 {
			end = len(decls)
		}
		t.decls = append(t.decls, decls[:end])
		decls = decls[end:]
	}
	slices.SortFunc(t.decls, bytes.Compare)
	for _, d := range t.decls {
		dst = append(dst, d...)
	}
	clear(t.decls)
	return dst
}

// sortedRules appends the ports' rules to dst grouped by chain, the chains
// in byte order as sortedDecls declares them, each chain's rules in their
// own order. Which chain a rule is appended to is all that counts in one
// restore, but legacy iptables-restore builds the table faster from rules
// that come chain by chain in the order of its chain list, as iptables-save
// writes them: the 10k-Service bench input (323k rules) loaded into an
// empty namespace took 5.42 s of iptables-restore's CPU as rendered (each
// port's chains together), 4.97 s grouped like this, 4.53 s as saved (the
// least of four interleaved loads each; 5.97, 5.41 and 4.85 s in a second
// set of six; iptables 1.8.9). This costs ~45 ms of ours at that size,
// sorting included.
func (t *tables) sortedRules(dst []byte) []byte {
	rules, runs := t.natRules.b, t.runs
	covered := 0
	if n := len(runs); n > 0 && runs[n-1].end < 0 {
		runs[n-1].end = len(rules)
	}
	for _, r := range runs {
		covered += r.end - r.start
	}
	if covered != len(rules)-t.natTopRules {
		// Not only what rulesOf was asked for (a test's tables): as is.
		return append(dst, rules[t.natTopRules:]...)
	}
	slices.SortFunc(runs, chainRun.compare)
	for _, r := range runs {
		dst = append(dst, rules[r.start:r.end]...)
	}
	return dst
}

// inputSize bounds the size of t's restore input, which is sized once:
// grown by appending, a 1k-Service full sync's 3.3 MB input cost ~5 ms of
// copying, a sixth of the sync's own CPU, and at 10k left garbage of its
// size.
func (t *tables) inputSize(stale []utiliptables.Chain) int {
	size := len("*filter\nCOMMIT\n*nat\nCOMMIT\n") + len(t.filterChains.b) + len(t.filterRules.b) +
		len(t.natChains.b) + len(t.natRules.b) + len(t.dispatch.b) + len(t.edits.b)
	for _, c := range stale {
		size += len("-X \n") + len(c)
	}
	return size
}

// restoreInput appends to dst the iptables-restore input for t: the filter
// table if filter, nat with its top-level chains if natTop (else only the
// re-rendered ports' own chains), and the deletion of stale chains, which
// must already be declared in t.natChains (a --noflush restore can only
// delete a chain it has flushed).
func (t *tables) restoreInput(dst []byte, filter, natTop bool, stale []utiliptables.Chain) []byte {
	dst = slices.Grow(dst, t.inputSize(stale))
	if filter {
		dst = append(dst, "*filter\n"...)
		dst = append(dst, t.filterChains.b...)
		dst = append(dst, t.filterRules.b...)
		dst = append(dst, "COMMIT\n"...)
	}
	dst = append(dst, "*nat\n"...)
	if natTop {
		dst = append(dst, t.natChains.b[:t.natTopChains]...)
	}
	dst = t.sortedDecls(dst, t.natChains.b[t.natTopChains:])
	if natTop {
		dst = append(dst, t.natRules.b[:t.natTopRules]...)
	}
	dst = t.sortedRules(dst)
	if natTop {
		dst = append(dst, t.dispatch.b...)
	} else {
		// After the ports' chains, which new rules jump to, and before
		// the stale chains' deletion, which removed rules jumped to.
		dst = append(dst, t.edits.b...)
	}
	for _, c := range stale {
		dst = append(dst, "-X "...)
		dst = append(dst, c...)
		dst = append(dst, '\n')
	}
	return append(dst, "COMMIT\n"...)
}

// ruleBuf accumulates iptables-restore lines. It takes strings only, unlike
// proxyutil.LineBuffer's ...interface{}, so writing a rule neither boxes its
// words nor reflects on them; the byte slice is kept across syncs.
type ruleBuf struct {
	b     []byte
	lines int
}

func (w *ruleBuf) reset() { w.b, w.lines = w.b[:0], 0 }

// line writes words separated by single spaces as one line.
func (w *ruleBuf) line(words ...string) {
	w.start(words...)
	w.end()
}

// start begins a line with words; finish it with more words and end().
// It lets a rule be assembled from fixed parts and optional fragments
// without building an argument slice.
func (w *ruleBuf) start(words ...string) {
	for i, s := range words {
		if i > 0 {
			w.b = append(w.b, ' ')
		}
		w.b = append(w.b, s...)
	}
}

// more appends words to the current line, each preceded by a space.
func (w *ruleBuf) more(words ...string) {
	for _, s := range words {
		w.b = append(w.b, ' ')
		w.b = append(w.b, s...)
	}
}

func (w *ruleBuf) end() {
	w.b = append(w.b, '\n')
	w.lines++
}

// chainLine declares a chain; in a --noflush restore this creates it or
// flushes it.
func (w *ruleBuf) chainLine(c utiliptables.Chain) {
	w.b = append(w.b, ':')
	w.b = append(w.b, c...)
	w.b = append(w.b, " - [0:0]\n"...)
	w.lines++
}

func (w *ruleBuf) appendBuf(o *ruleBuf) {
	w.b = append(w.b, o.b...)
	w.lines += o.lines
}
