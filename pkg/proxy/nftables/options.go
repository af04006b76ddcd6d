//go:build linux

package nftables

import (
	"io"

	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// options collects what Options set.
type options struct {
	syncshell.HostOptions
	nft       knftables.Interface
	conntrack conntrack.Interface
	// ledger is shared by the two families of a dual-stack proxier
	// (drift.go's genLedger); nil gives each proxier its own.
	ledger *genLedger
}

// Option customizes a Proxier built by NewProxierWithOptions or
// NewDualStackProxierWithOptions. The names and meanings are those of the
// iptables proxier's options.
type Option func(*options)

func applyOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithDryRun makes every sync write the nft transactions it would run to w
// (in `nft -f` syntax) and apply them to an in-memory table instead of the
// kernel. The proxier then touches nothing on the host: no conntrack
// cleanup, no per-service health check listeners, no healthz reports.
func WithDryRun(w io.Writer) Option { return func(o *options) { o.DryRun = w } }

// WithNFTables programs nft instead of the host's nftables, for example a
// knftables.NewFake() whose final ruleset a test or an embedder reads back.
// nft must be for this proxier's family and the kube-proxy table.
func WithNFTables(nft knftables.Interface) Option { return func(o *options) { o.nft = nft } }

// WithConntrack replaces the netlink conntrack client (tests pass
// conntrack.NewFake()).
func WithConntrack(ct conntrack.Interface) Option { return func(o *options) { o.conntrack = ct } }

// WithServiceHealthServer replaces the per-service health check server.
func WithServiceHealthServer(s healthcheck.ServiceHealthServer) Option {
	return func(o *options) { o.ServiceHealthServer = s }
}

// WithNetworkInterfacer replaces the source of host addresses used to
// expand nodePortAddresses.
func WithNetworkInterfacer(n proxyutil.NetworkInterfacer) Option {
	return func(o *options) { o.NetworkInterfacer = n }
}

// WithSyncHook calls fn after every sync (full or partial, with its duration
// and error), on the syncing goroutine, so a caller can wait for a sync
// instead of sleeping. fn must not block.
func WithSyncHook(fn func(syncshell.SyncResult)) Option { return func(o *options) { o.SyncHook = fn } }
