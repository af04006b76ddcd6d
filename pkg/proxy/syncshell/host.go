package syncshell

import (
	"io"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// HostOptions are the options kube-proxy's proxiers share for what they
// reach on the host besides their own kernel interface. The With* options of
// the proxieropts sub-package set them, so that WithDryRun,
// WithServiceHealthServer, WithNetworkInterfacer and WithSyncHook mean the
// same in every mode.
type HostOptions struct {
	// DryRun, when set, receives what a sync would program instead of the
	// host; nothing on the host is touched.
	DryRun              io.Writer
	ServiceHealthServer healthcheck.ServiceHealthServer
	NetworkInterfacer   proxyutil.NetworkInterfacer
	// SyncHook is Options.OnSync.
	SyncHook func(SyncResult)
}

// Complete fills in what no option set: a per-service health check server on
// nodePortAddresses that answers with healthz's health (for a dry run a fake
// one, which opens no listener) and the host's network interfaces.
func (o *HostOptions) Complete(family v1.IPFamily, nodeName string, recorder events.EventRecorder,
	nodePortAddresses *proxyutil.NodePortAddresses, healthz *healthcheck.ProxyHealthServer) {
	switch {
	case o.ServiceHealthServer != nil:
	case o.DryRun != nil:
		o.ServiceHealthServer = healthcheck.NewFakeServiceHealthServer()
	default:
		o.ServiceHealthServer = healthcheck.NewServiceHealthServer(nodeName, recorder, nodePortAddresses, healthz, family)
	}
	if o.NetworkInterfacer == nil {
		o.NetworkInterfacer = proxyutil.RealNetwork{}
	}
}
