// Package behaviour is the one behaviour table every proxier's tests run:
// a list of clusters (Services, EndpointSlices, this node's topology) and,
// for packets sent into each, the outcome the node must give them, written
// without reference to any rule syntax (DNAT to one of these endpoints,
// masqueraded or not, rejected, dropped, or left alone).
//
// Each proxier's test package builds its proxier over its own fakes, feeds it
// a Scenario's objects, and answers Packets with its own evaluator (the
// iptables and nftables packet tracers, the ipvs tracer over the fake IPVS,
// ipset and iptables state, the fake HNS load balancers for winkernel); Run
// compares the answers with the table. Where a proxier legitimately behaves
// otherwise than the others, the check says so for that proxier, with the
// reason, in Check.Except; nothing is skipped silently.
//
// The table is written per IP family from an Addresses value the proxier's
// test supplies, because each proxier's fakes are set up with their own node,
// pod and service ranges.
//
// It is test support only: production code never imports it.
//
// Allowed imports: the standard library, k8s.io/{api,apimachinery,utils},
// pkg/proxy/source/testing (the fixture builders) and pkg/proxy/trace (the
// packet tracer whose results FromTrace reads).
package behaviour
