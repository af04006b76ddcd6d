//go:build linux

package app

import (
	"context"

	utiliptables "k8s.io/net-utils/iptables"
	utilsysctl "k8s.io/net-utils/sysctl"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/iptables"
)

func newIPTablesProxier(ctx context.Context, s *ProxyServer, f familySetup) (proxy.Provider, error) {
	var ipt utiliptables.Interface
	if f.dryRun == nil {
		// platformCheckSupported found this family's iptables present.
		var err error
		if ipt, err = s.iptablesFor(ctx, f.family); err != nil {
			return nil, err
		}
	}
	return asProvider(iptables.NewProxierWithOptions(ctx, s.Config, f.family, ipt, utilsysctl.New(),
		f.localDetector, s.NodeName, f.nodeIP, s.Recorder, s.HealthzServer, f.initOnly, f.dryRunOptions()...))
}
