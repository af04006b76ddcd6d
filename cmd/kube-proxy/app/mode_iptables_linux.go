//go:build linux

package app

import (
	"context"

	v1 "k8s.io/api/core/v1"
	utiliptables "k8s.io/net-utils/iptables"
	utilsysctl "k8s.io/net-utils/sysctl"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/iptables"
)

func init() {
	proxierModes[kubeproxyconfig.ProxyModeIPTables] = proxierMode{dryRunKind: "iptables-restore input", newProxier: newIPTablesProxier}
}

func newIPTablesProxier(ctx context.Context, s *ProxyServer, f familySetup) (proxy.Provider, error) {
	var ipt utiliptables.Interface
	var opts []iptables.Option
	if f.dryRun != nil {
		opts = append(opts, iptables.WithDryRun(f.dryRun))
		if f.nodeAddrs != nil {
			opts = append(opts, iptables.WithNetworkInterfacer(f.nodeAddrs))
		}
	} else {
		backend, err := s.iptablesBackend(ctx)
		if err != nil {
			return nil, err
		}
		// platformCheckSupported found this family's iptables present.
		protocol := utiliptables.ProtocolIPv4
		if f.family == v1.IPv6Protocol {
			protocol = utiliptables.ProtocolIPv6
		}
		ipt = utiliptables.NewWithBackend(protocol, backend)
	}
	return asProvider(iptables.NewProxierWithOptions(ctx, s.Config, f.family, ipt, utilsysctl.New(),
		f.localDetector, s.NodeName, f.nodeIP, s.Recorder, s.HealthzServer, f.initOnly, opts...))
}
