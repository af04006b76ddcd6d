//go:build linux

package app

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	utilipset "k8s.io/net-utils/ipset"
	ipsettest "k8s.io/net-utils/ipset/testing"
	iptablestest "k8s.io/net-utils/iptables/testing"
	utilipvs "k8s.io/net-utils/ipvs"
	ipvstest "k8s.io/net-utils/ipvs/testing"
	utilsysctl "k8s.io/net-utils/sysctl"
	sysctltest "k8s.io/net-utils/sysctl/testing"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/ipvs"
)

// ipvsDeprecationMessage is upstream 1.37's wording, logged and sent as the
// IPVSDeprecation event.
const ipvsDeprecationMessage = "The ipvs proxier has been deprecated and will be disabled by default in Kubernetes 1.40 and removed in Kubernetes 1.43. Migrate to the 'nftables' proxier instead."

// ipvsAvailable and newIPVSHandles are replaced by tests.
var (
	ipvsAvailable  = utilipvs.Available
	newIPVSHandles = func() (utilipvs.Interface, utilipset.Interface, error) {
		h, err := utilipvs.NewChecked()
		return h, utilipset.New(), err
	}
)

// checkIPVSAvailable runs before kube-proxy changes anything on the host,
// so that a kernel without IPVS (or an ipset too old, or an unknown
// scheduler) stops it with the reason instead of leaving half-made state.
func checkIPVSAvailable(ctx context.Context, cfg *kubeproxyconfig.KubeProxyConfiguration) error {
	if err := ipvsAvailable(); err != nil {
		return fmt.Errorf("can't use the IPVS proxier: the kernel lacks IPVS support (ip_vs module): %w", err)
	}
	h, set, err := newIPVSHandles()
	if err != nil {
		return fmt.Errorf("can't use the IPVS proxier: the kernel lacks IPVS support (ip_vs module): %w", err)
	}
	if err := ipvs.CanUseIPVSProxier(ctx, h, set, cfg.IPVS.Scheduler); err != nil {
		return fmt.Errorf("can't use the IPVS proxier: %w", err)
	}
	return nil
}

func newIPVSProxier(ctx context.Context, s *ProxyServer, f familySetup) (proxy.Provider, error) {
	logger := klog.FromContext(ctx)
	if f.dryRun != nil {
		return newIPVSDryRunProxier(ctx, s, f)
	}
	h, set, err := newIPVSHandles()
	if err != nil {
		return nil, fmt.Errorf("can't use the IPVS proxier: the kernel lacks IPVS support (ip_vs module): %w", err)
	}
	ipt, err := s.iptablesFor(ctx, f.family)
	if err != nil {
		return nil, err
	}
	if f.family == s.PrimaryIPFamily {
		// Once per process, also when dual-stack builds two proxiers.
		logger.Info("Using ipvs Proxier")
		logger.Error(nil, ipvsDeprecationMessage)
		if s.Recorder != nil {
			s.Recorder.Eventf(s.NodeRef, nil, v1.EventTypeWarning, "IPVSDeprecation", "StartKubeProxy", ipvsDeprecationMessage)
		}
	}
	return asProvider(ipvs.NewProxier(ctx, s.Config, f.family, ipt, h, set,
		utilsysctl.New(), f.localDetector, s.NodeName, f.nodeIP, s.Recorder, s.HealthzServer, f.initOnly))
}

// ipvsDryRunKind names what an ipvs dry run prints: the planned state in
// the formats of the tools an operator reads it with (proxieropts.WithDryRun in ipvs mode).
const ipvsDryRunKind = "planned state: ip addr, ipvsadm-save -n, ipset save, iptables-save"

// newIPVSDryRunProxier builds an ipvs proxier that programs net-utils'
// in-memory IPVS, ipset and iptables instead of the kernel and prints what
// they hold after each sync. IPVS state is kernel state, not a script, so
// capturing it needs stand-ins that keep it; the fakes are the ones the
// proxier's own tests run against. (Testing packages stay out of production
// code otherwise; this use is confined to the dry run, which must show what
// the kernel would hold without touching it.)
func newIPVSDryRunProxier(ctx context.Context, s *ProxyServer, f familySetup) (proxy.Provider, error) {
	ipt := iptablestest.NewFake()
	if f.family == v1.IPv6Protocol {
		ipt = iptablestest.NewIPv6Fake()
	}
	return asProvider(ipvs.NewProxierWithOptions(ctx, s.Config, f.family, ipt, ipvstest.NewFake(), ipsettest.NewFake(ipvs.MinIPSetCheckVersion),
		sysctltest.NewFake(), f.localDetector, s.NodeName, f.nodeIP, nil, nil, false, f.dryRunOptions()...))
}
