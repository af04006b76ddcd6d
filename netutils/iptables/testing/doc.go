// Package testing provides FakeIPTables, an in-memory iptables.Interface, and a parser
// for iptables-save / iptables-restore data (ParseIPTablesDump, ParseRule) that tests
// use to inspect rules and to trace packets through them.
//
// Packet tracers walk Dump's chains and evaluate each Rule's parsed fields; the
// IPTablesValue helpers (MatchesIP, MatchesPort, MatchesInterface, MatchesList,
// MatchesMark) and Rule.ApplyMark do the per-match arithmetic the kernel would.
//
// The exported API matches k8s.io/kubernetes/pkg/util/iptables/testing (v1.37); the
// additions (more Rule fields, Chain.Policy, restore history and error injection on the
// fake) are documented where they are declared.
//
// Allowed imports: the standard library, k8s.io/net-utils/iptables and
// k8s.io/apimachinery.
package testing
