//go:build linux

package iptables

import (
	"io"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	"k8s.io/kube-proxy/pkg/proxy/util/nfacct"
)

// options collects what Options set.
type options struct {
	syncshell.HostOptions
	conntrack conntrack.Interface
	nfacct    nfacct.Interface
	nfacctSet bool
	stopCh    <-chan struct{}
	noMonitor bool
}

// Option customizes a Proxier built by NewProxierWithOptions or
// NewDualStackProxierWithOptions.
type Option func(*options)

// complete fills in what no Option set: the host's clients, or for a dry
// run stand-ins that touch nothing.
func (o *options) complete(ipFamily v1.IPFamily, nodeName string, recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer, nodePortAddresses *proxyutil.NodePortAddresses, logger klog.Logger) {
	o.Complete(ipFamily, nodeName, recorder, nodePortAddresses, healthzServer)
	dryRun := o.DryRun != nil
	if !o.nfacctSet && !dryRun {
		n, err := nfacct.New()
		if err != nil {
			logger.Error(err, "Failed to create nfacct runner, nfacct based metrics won't be available")
		} else {
			o.nfacct = n
		}
	}
	if o.conntrack == nil && !dryRun {
		o.conntrack = conntrack.New()
	}
}

// WithDryRun makes every sync write the iptables-restore input it would
// apply to w, instead of applying it, and makes the proxier touch nothing on
// the host: no sysctl writes, no iptables calls (ipt may be nil; if given it
// is not used), no conntrack cleanup, no nfacct, no canary Monitor and no
// per-service health check listeners. The sync runs as usual against an
// iptables interface that prints each restore and reads as an empty kernel.
// The jumps from builtin chains, which a full sync adds apart from its
// restore, are printed first as "# ensure:" comment lines, so the
// whole output is valid iptables-restore input. Later (partial) syncs print
// only what they would change, as a real partial sync restores only that.
// This is what `kube-proxy --dry-run` uses.
func WithDryRun(w io.Writer) Option { return func(o *options) { o.DryRun = w } }

// WithConntrack replaces the netlink conntrack client (tests pass
// conntrack.NewFake()).
func WithConntrack(ct conntrack.Interface) Option { return func(o *options) { o.conntrack = ct } }

// WithNFAcct replaces the netlink nfacct client; nil disables the nfacct
// counters and their metrics.
func WithNFAcct(n nfacct.Interface) Option {
	return func(o *options) { o.nfacct, o.nfacctSet = n, true }
}

// WithServiceHealthServer replaces the per-service health check server.
func WithServiceHealthServer(s healthcheck.ServiceHealthServer) Option {
	return func(o *options) { o.ServiceHealthServer = s }
}

// WithNetworkInterfacer replaces the source of host addresses used to
// expand nodePortAddresses.
func WithNetworkInterfacer(n proxyutil.NetworkInterfacer) Option {
	return func(o *options) { o.NetworkInterfacer = n }
}

// WithStopCh stops the canary Monitor goroutine when stop is closed.
// Upstream's proxier monitors until the process exits.
func WithStopCh(stop <-chan struct{}) Option { return func(o *options) { o.stopCh = stop } }

// WithoutMonitor disables the canary Monitor (for tests driving syncs by hand).
func WithoutMonitor() Option { return func(o *options) { o.noMonitor = true } }

// WithSyncHook calls fn after every sync (full or partial, with its duration
// and error), on the syncing goroutine, so a caller can wait for a sync
// instead of sleeping. fn must not block.
func WithSyncHook(fn func(syncshell.SyncResult)) Option { return func(o *options) { o.SyncHook = fn } }
