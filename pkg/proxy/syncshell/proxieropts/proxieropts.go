//go:build linux

package proxieropts

import (
	"context"
	"fmt"
	"io"

	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// Options is what the shared options set, plus each proxier's own options.
type Options struct {
	syncshell.HostOptions
	// Conntrack replaces the netlink conntrack client; nil leaves the
	// proxier's default (the host's, or none for a dry run).
	Conntrack conntrack.Interface

	// own holds one value per proxier-specific options type Set was used
	// with, as pointers; Collect keeps the caller's and refuses the rest.
	own []any
}

// Option customizes a proxier built by a NewProxierWithOptions or
// NewDualStackProxierWithOptions of iptables, ipvs or nftables.
type Option func(*Options)

// Set returns an Option that edits the proxier-specific options of type T
// (the proxier's own unexported struct), so a proxier can add options of its
// own to the shared set.
func Set[T any](fn func(*T)) Option {
	return func(o *Options) { fn(own[T](o)) }
}

// own returns o's *T, adding a zero T on first use.
func own[T any](o *Options) *T {
	for _, v := range o.own {
		if t, ok := v.(*T); ok {
			return t
		}
	}
	t := new(T)
	o.own = append(o.own, t)
	return t
}

// Collected are the options a proxier was given: the shared ones and its
// own, of type T.
type Collected[T any] struct {
	Options
	Own T
}

// Collect applies opts in order and returns the shared options and the
// proxier-specific ones of type T (zero when none were set). An option made
// by Set for another type, that is for another proxier, is an error rather
// than silently ignored.
func Collect[T any](opts []Option) (Collected[T], error) {
	var o Options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	c := Collected[T]{Own: *own[T](&o)}
	for _, v := range o.own {
		if _, ok := v.(*T); !ok {
			var want *T
			return c, fmt.Errorf("option for another proxier: it sets %T, this proxier reads %T", v, want)
		}
	}
	o.own = nil
	c.Options = o
	return c, nil
}

// NewShell builds the proxier's sync shell over b (syncshell.NewProxierShell)
// with what the shared options hold: the per-service health check server,
// stale UDP flow cleanup through Conntrack, and the sync hook.
func (o *Options) NewShell(ctx context.Context, ps syncshell.ProxierShell, b syncshell.Backend) (*syncshell.Shell, error) {
	ps.ServiceHealth = o.ServiceHealthServer
	ps.CleanStaleConntrack = conntrack.StaleEntriesCleaner(o.Conntrack, ps.Family)
	ps.OnSync = o.SyncHook
	return syncshell.NewProxierShell(ctx, ps, b)
}

// WithDryRun makes every sync write what it would program to w instead of
// programming it, and makes the proxier touch nothing on the host: no
// sysctl writes, no conntrack cleanup, no per-service health check
// listeners, no healthz reports. What is written depends on the mode: the
// iptables-restore input (iptables), the nft transactions (nftables), the
// planned IPVS, ipset, address and iptables state (ipvs); see each
// proxier's package documentation. This is what `kube-proxy --dry-run`
// uses.
func WithDryRun(w io.Writer) Option { return func(o *Options) { o.DryRun = w } }

// WithConntrack replaces the netlink conntrack client (tests pass
// conntrack.NewFake()).
func WithConntrack(ct conntrack.Interface) Option { return func(o *Options) { o.Conntrack = ct } }

// WithServiceHealthServer replaces the per-service health check server.
func WithServiceHealthServer(s healthcheck.ServiceHealthServer) Option {
	return func(o *Options) { o.ServiceHealthServer = s }
}

// WithNetworkInterfacer replaces the source of the node's addresses, which
// nodePortAddresses expands to.
func WithNetworkInterfacer(n proxyutil.NetworkInterfacer) Option {
	return func(o *Options) { o.NetworkInterfacer = n }
}

// WithSyncHook calls fn after every sync (full or partial, with its duration
// and error), on the syncing goroutine, so a caller can wait for a sync
// instead of sleeping. fn must not block.
func WithSyncHook(fn func(syncshell.SyncResult)) Option {
	return func(o *Options) { o.SyncHook = fn }
}
