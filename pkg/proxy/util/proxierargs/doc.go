// Package proxierargs holds the checks and defaults that every proxier's
// constructor applies to its arguments the same way: a configuration must be
// given and the IP family must be IPv4 or IPv6 (all four modes, and the sync
// shell they build), and the masquerade bit defaults to 14 and must lie in
// [0, 31] (iptables, ipvs, nftables). Written once, the modes reject the same
// input with the same words.
//
// It is part of the brain layer. Allowed imports: the standard library,
// k8s.io/api and pkg/proxy/apis/config. It must not import any proxier,
// and proxiers must not import each other for it.
package proxierargs
