// Package proxierargs holds the checks and defaults that every Linux
// proxier's constructor (iptables, ipvs, nftables) applies to its arguments
// the same way: a configuration must be given, the IP family must be IPv4
// or IPv6, and the masquerade bit defaults to 14 and must lie in [0, 31].
// Written once, the three modes reject the same input with the same words.
//
// It is part of the brain layer. Allowed imports: the standard library,
// k8s.io/api and pkg/proxy/apis/config. It must not import any proxier,
// and proxiers must not import each other for it.
package proxierargs
