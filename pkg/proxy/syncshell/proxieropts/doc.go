// Package proxieropts is the one set of options kube-proxy's own Linux
// proxiers (iptables, ipvs, nftables) accept in their NewProxierWithOptions
// and NewDualStackProxierWithOptions: WithDryRun, WithServiceHealthServer,
// WithNetworkInterfacer, WithSyncHook and WithConntrack mean the same in
// every mode because they are defined here, once. Each proxier's Option is
// an alias of Option; what only one proxier understands (iptables'
// WithNFAcct, nftables' WithNFTables) it defines itself with Set, and
// Collect refuses an option that belongs to another proxier.
//
// It sits beside the sync shell it configures (layer 2 of CONTRIBUTING.md's
// "The way down") and may import syncshell, the brain (healthcheck, util,
// conntrack) and net-utils; never a proxier. It is Linux only, like
// conntrack and the proxiers that use it.
package proxieropts
