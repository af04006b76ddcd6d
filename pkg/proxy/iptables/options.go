//go:build linux

package iptables

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	"k8s.io/kube-proxy/pkg/proxy/util/nfacct"
)

// Option customizes a Proxier built by NewProxierWithOptions or
// NewDualStackProxierWithOptions: the options every proxier shares
// (proxieropts.WithDryRun, WithConntrack, WithServiceHealthServer,
// WithNetworkInterfacer, WithSyncHook) and this package's own below.
//
// With proxieropts.WithDryRun a sync writes the iptables-restore input it
// would apply instead of applying it, and the proxier touches nothing on the
// host: no sysctl writes, no iptables calls (ipt may be nil; if given it is
// not used), no conntrack cleanup, no nfacct, no canary Monitor and no
// per-service health check listeners. The sync runs as usual against an
// iptables interface that prints each restore and reads as an empty kernel.
// The jumps from builtin chains, which a full sync adds apart from its
// restore, are printed first as "# ensure:" comment lines, so the whole
// output is valid iptables-restore input. Later (partial) syncs print only
// what they would change, as a real partial sync restores only that.
type Option = proxieropts.Option

// ownOptions are the options only this proxier has.
type ownOptions struct {
	nfacct    nfacct.Interface
	nfacctSet bool
	stopCh    <-chan struct{}
	noMonitor bool
}

// complete fills in what no Option set: the host's clients, or for a dry
// run stand-ins that touch nothing.
func completeOptions(o *proxieropts.Collected[ownOptions], ipFamily v1.IPFamily, nodeName string, recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer, nodePortAddresses *proxyutil.NodePortAddresses, logger klog.Logger) {
	o.Complete(ipFamily, nodeName, recorder, nodePortAddresses, healthzServer)
	dryRun := o.DryRun != nil
	if !o.Own.nfacctSet && !dryRun {
		n, err := nfacct.New()
		if err != nil {
			logger.Error(err, "Failed to create nfacct runner, nfacct based metrics won't be available")
		} else {
			o.Own.nfacct = n
		}
	}
	if o.Conntrack == nil && !dryRun {
		o.Conntrack = conntrack.New()
	}
}

// WithNFAcct replaces the netlink nfacct client; nil disables the nfacct
// counters and their metrics.
func WithNFAcct(n nfacct.Interface) Option {
	return proxieropts.Set(func(o *ownOptions) { o.nfacct, o.nfacctSet = n, true })
}

// WithStopCh stops the canary Monitor goroutine when stop is closed.
// Upstream's proxier monitors until the process exits.
func WithStopCh(stop <-chan struct{}) Option {
	return proxieropts.Set(func(o *ownOptions) { o.stopCh = stop })
}

// WithoutMonitor disables the canary Monitor (for tests driving syncs by hand).
func WithoutMonitor() Option { return proxieropts.Set(func(o *ownOptions) { o.noMonitor = true }) }
