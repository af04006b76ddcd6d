//go:build linux

package nftables

import (
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/features"
	utilkernel "k8s.io/kube-proxy/pkg/proxy/util/kernel"
)

// skipKernelCheckEnv disables the kernel version check, as upstream.
const skipKernelCheckEnv = "KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK"

// getNFTablesInterface returns a knftables.Interface for the family's
// kube-proxy table after checking that nftables mode can work here.
func getNFTablesInterface(ipFamily v1.IPFamily) (knftables.Interface, error) {
	var options []knftables.Option
	if features.DefaultFeatureGate.Enabled(features.NFTablesNetlink) {
		options = append(options, knftables.UseNetlink)
	}
	// knftables.New requires nft >= 1.0.1: older versions parse the whole
	// ruleset and can crash on other components' rules.
	nft, err := knftables.New(familyOf(ipFamily), kubeProxyTable, options...)
	if err != nil {
		return nil, fmt.Errorf("nftables is not usable for %s: %w", ipFamily, err)
	}
	// Rules written by a new nft can make an old system nft unusable; the
	// kernel version is the proxy for "the host's nft is recent enough".
	if os.Getenv(skipKernelCheckEnv) == "" {
		kernelVersion, err := utilkernel.GetVersion()
		if err != nil {
			return nil, fmt.Errorf("could not check kernel version: %w", err)
		}
		if kernelVersion.LessThan(version.MustParseGeneric(utilkernel.NFTablesKubeProxyKernelVersion)) {
			return nil, fmt.Errorf("kube-proxy in nftables mode requires kernel %s or later (have %s; set %s to skip this check)",
				utilkernel.NFTablesKubeProxyKernelVersion, kernelVersion, skipKernelCheckEnv)
		}
	}
	return nft, nil
}
