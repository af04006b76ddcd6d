//go:build linux

package nftables

import (
	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
)

// Option customizes a Proxier built by NewProxierWithOptions or
// NewDualStackProxierWithOptions: the options every proxier shares
// (proxieropts.WithDryRun, WithConntrack, WithServiceHealthServer,
// WithNetworkInterfacer, WithSyncHook) and WithNFTables below.
//
// With proxieropts.WithDryRun every sync writes the nft transactions it
// would run (in `nft -f` syntax) and applies them to an in-memory table
// instead of the kernel; the proxier then touches nothing on the host: no
// conntrack cleanup, no per-service health check listeners, no healthz
// reports.
type Option = proxieropts.Option

// ownOptions are the options only this proxier has.
type ownOptions struct {
	nft knftables.Interface
	// ledger is shared by the two families of a dual-stack proxier
	// (drift.go's genLedger); nil gives each proxier its own.
	ledger *genLedger
}

// WithNFTables programs nft instead of the host's nftables, for example a
// knftables.NewFake() whose final ruleset a test or an embedder reads back.
// nft must be for this proxier's family and the kube-proxy table.
func WithNFTables(nft knftables.Interface) Option {
	return proxieropts.Set(func(o *ownOptions) { o.nft = nft })
}
