// Package trace answers "what happens to this packet on this node?" from the
// rules the node holds, without sending anything.
//
// It evaluates one new connection's first packet (source, destination,
// protocol, port, and where it enters: from a pod or another host through an
// interface, or from a process on the node itself) through a ruleset, along
// the netfilter hooks the kernel would run it through, and reports every
// possible fate: accepted, dropped or rejected, each DNAT target with its
// probability (iptables statistic rules, nftables numgen slots), whether it
// is masqueraded, which session-affinity lists it is checked against or
// recorded in, and the path of chains, rules and map lookups that decided it.
// Each step is annotated with the Service and endpoint it belongs to, read
// from kube-proxy's rule comments and chain, set and map names.
//
// Rulesets come from:
//   - iptables: iptables-save text (ParseIPTablesSave); the same text is what
//     net-utils' iptables fake saves, so the iptables backend's tests trace
//     through this package;
//   - nftables: `nft -j list ruleset` / `nft -j list table` JSON
//     (ParseNFTJSON), or an nft script such as knftables' Fake.Dump() or
//     kube-proxy's --dry-run output (ParseNFTScript);
//   - ipvs: the iptables rules as above, ip sets (`ipset save` or `ipset
//     list`, ParseIPSets, or NewIPSet), the IPVS virtual servers
//     (`ipvsadm -Ln`, ParseIPVSAdm, or VirtualServer values) and the
//     addresses on kube-ipvs0, put together by NewIPVS. IPVS takes a packet
//     between filter INPUT and nat INPUT (from outside) or between nat and
//     filter OUTPUT (from the node) and sends it to each real server of
//     weight above 0, with the rr/wrr share as its probability; the ipvs
//     backend's tests trace through this with the fakes' state.
//
// The tracer does not guess. A rule, match, expression or target it does not
// model is reported in the result (Outcome.Verdict Unknown, Result.Unknowns)
// once the packet reaches it and everything the tracer does understand about
// the rule matches; rules that belong to someone else (chains and tables not
// named like kube-proxy's) are traced when understood and flagged as foreign.
// CompareIPTables and CompareNFT report how a live ruleset differs from what
// kube-proxy would program, by meaning: a numgen lookup compares as the share
// of packets it sends to each target, not by its map's slot layout.
// CompareIPVS does the same for an ipvs-mode node's whole planned state:
// virtual and real servers, kube-proxy's ip sets, kube-ipvs0's addresses
// and the iptables rules, whatever order the kernel lists them in.
// HasKubeProxyRules says whether a ruleset holds anything kube-proxy
// programs at all.
//
// SocketLB is the answer of kube-proxy's socket-level load balancer (--socket-lb),
// which translates a Service address when a local socket connects, before any rule
// sees a packet: the caller reads its BPF maps back and NewSocketLB says what they
// do with the packet, beside what the rules do.
//
// Kernel state the rules refer to but do not hold (conntrack entries, the
// node's addresses, iptables' -m recent lists, which interfaces are
// bridges) is given by the caller in Node; nftables affinity sets carry their elements in the ruleset itself.
//
// Allowed imports: the standard library and k8s.io/klog/v2. It must build on
// every platform and never import a proxier package: the proxiers' tests
// import it.
package trace
