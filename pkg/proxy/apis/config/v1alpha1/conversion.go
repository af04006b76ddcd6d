package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/utils/ptr"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// Convert_v1alpha1_KubeProxyConfiguration_To_config_KubeProxyConfiguration converts
// a v1alpha1 configuration to the internal form. Per-backend values that the
// internal form holds once are taken from the block of the configured mode.
func Convert_v1alpha1_KubeProxyConfiguration_To_config_KubeProxyConfiguration(in *configv1alpha1.KubeProxyConfiguration, out *config.KubeProxyConfiguration, s conversion.Scope) error {
	if err := autoConvert_v1alpha1_KubeProxyConfiguration_To_config_KubeProxyConfiguration(in, out, s); err != nil {
		return err
	}
	out.Windows.RunAsService = in.WindowsRunAsService
	out.Linux.Conntrack = config.KubeProxyConntrackConfiguration(in.Conntrack)
	out.Linux.OOMScoreAdj = in.OOMScoreAdj

	switch config.ProxyMode(in.Mode) {
	case config.ProxyModeIPVS:
		out.SyncPeriod, out.MinSyncPeriod = in.IPVS.SyncPeriod, in.IPVS.MinSyncPeriod
		out.Linux.MasqueradeAll = in.IPTables.MasqueradeAll
	case config.ProxyModeNFTables:
		out.SyncPeriod, out.MinSyncPeriod = in.NFTables.SyncPeriod, in.NFTables.MinSyncPeriod
		out.Linux.MasqueradeAll = in.NFTables.MasqueradeAll
	default:
		out.SyncPeriod, out.MinSyncPeriod = in.IPTables.SyncPeriod, in.IPTables.MinSyncPeriod
		out.Linux.MasqueradeAll = in.IPTables.MasqueradeAll
	}

	// v1alpha1's ipvs backend marks with iptables.masqueradeBit.
	if in.IPTables.MasqueradeBit != nil {
		out.IPVS.MasqueradeBit = ptr.To(*in.IPTables.MasqueradeBit)
	} else {
		out.IPVS.MasqueradeBit = nil
	}

	if in.ClusterCIDR != "" {
		out.DetectLocal.ClusterCIDRs = strings.Split(in.ClusterCIDR, ",")
	} else {
		out.DetectLocal.ClusterCIDRs = nil
	}

	// What v1alpha1 kube-proxy always did: proxy every family the node has, and
	// (through its lenient-decoding fallback) carry on past unknown fields.
	out.IPFamilyPolicy = config.IPFamilyPolicyPreferDualStack
	out.ConfigHardFail = false
	out.NodeIPOverride = nil
	// v1alpha1 has no node-local state server; only the flags configure it.
	out.LocalNode = config.KubeProxyLocalNodeConfiguration{}
	// Nor socket load balancing; only the --socket-lb flags configure it.
	out.SocketLB = config.KubeProxySocketLBConfiguration{}
	return nil
}

// Convert_config_KubeProxyConfiguration_To_v1alpha1_KubeProxyConfiguration converts
// the internal form to v1alpha1. Values the internal form holds once go to the
// block of the configured mode only, so that reading the result back gives the
// same internal configuration; the other blocks keep their zero values.
func Convert_config_KubeProxyConfiguration_To_v1alpha1_KubeProxyConfiguration(in *config.KubeProxyConfiguration, out *configv1alpha1.KubeProxyConfiguration, s conversion.Scope) error {
	if err := autoConvert_config_KubeProxyConfiguration_To_v1alpha1_KubeProxyConfiguration(in, out, s); err != nil {
		return err
	}
	out.WindowsRunAsService = in.Windows.RunAsService
	out.Conntrack = configv1alpha1.KubeProxyConntrackConfiguration(in.Linux.Conntrack)
	out.OOMScoreAdj = in.Linux.OOMScoreAdj

	switch in.Mode {
	case config.ProxyModeIPVS:
		out.IPVS.SyncPeriod, out.IPVS.MinSyncPeriod = in.SyncPeriod, in.MinSyncPeriod
		out.IPTables.MasqueradeAll = in.Linux.MasqueradeAll
		// In ipvs mode the ipvs bit is the one in effect, and v1alpha1 keeps it
		// in iptables.masqueradeBit.
		if in.IPVS.MasqueradeBit != nil {
			out.IPTables.MasqueradeBit = ptr.To(*in.IPVS.MasqueradeBit)
		}
	case config.ProxyModeNFTables:
		out.NFTables.SyncPeriod, out.NFTables.MinSyncPeriod = in.SyncPeriod, in.MinSyncPeriod
		out.NFTables.MasqueradeAll = in.Linux.MasqueradeAll
	default:
		out.IPTables.SyncPeriod, out.IPTables.MinSyncPeriod = in.SyncPeriod, in.MinSyncPeriod
		out.IPTables.MasqueradeAll = in.Linux.MasqueradeAll
	}

	if len(in.DetectLocal.ClusterCIDRs) > 0 {
		out.ClusterCIDR = strings.Join(in.DetectLocal.ClusterCIDRs, ",")
	}
	// v1alpha1 can name only the primary node IP.
	if out.BindAddress == "" && len(in.NodeIPOverride) > 0 {
		out.BindAddress = in.NodeIPOverride[0]
	}
	return nil
}

// Convert_v1alpha1_KubeProxyIPTablesConfiguration_To_config_KubeProxyIPTablesConfiguration
// drops the sync periods and masqueradeAll, which the top-level conversion places.
func Convert_v1alpha1_KubeProxyIPTablesConfiguration_To_config_KubeProxyIPTablesConfiguration(in *configv1alpha1.KubeProxyIPTablesConfiguration, out *config.KubeProxyIPTablesConfiguration, s conversion.Scope) error {
	return autoConvert_v1alpha1_KubeProxyIPTablesConfiguration_To_config_KubeProxyIPTablesConfiguration(in, out, s)
}

// Convert_v1alpha1_KubeProxyIPVSConfiguration_To_config_KubeProxyIPVSConfiguration
// drops the sync periods, which the top-level conversion places.
func Convert_v1alpha1_KubeProxyIPVSConfiguration_To_config_KubeProxyIPVSConfiguration(in *configv1alpha1.KubeProxyIPVSConfiguration, out *config.KubeProxyIPVSConfiguration, s conversion.Scope) error {
	return autoConvert_v1alpha1_KubeProxyIPVSConfiguration_To_config_KubeProxyIPVSConfiguration(in, out, s)
}

// Convert_config_KubeProxyIPVSConfiguration_To_v1alpha1_KubeProxyIPVSConfiguration
// drops the masquerade bit, which the top-level conversion places.
func Convert_config_KubeProxyIPVSConfiguration_To_v1alpha1_KubeProxyIPVSConfiguration(in *config.KubeProxyIPVSConfiguration, out *configv1alpha1.KubeProxyIPVSConfiguration, s conversion.Scope) error {
	return autoConvert_config_KubeProxyIPVSConfiguration_To_v1alpha1_KubeProxyIPVSConfiguration(in, out, s)
}

// Convert_v1alpha1_KubeProxyNFTablesConfiguration_To_config_KubeProxyNFTablesConfiguration
// drops the sync periods and masqueradeAll, which the top-level conversion places.
func Convert_v1alpha1_KubeProxyNFTablesConfiguration_To_config_KubeProxyNFTablesConfiguration(in *configv1alpha1.KubeProxyNFTablesConfiguration, out *config.KubeProxyNFTablesConfiguration, s conversion.Scope) error {
	return autoConvert_v1alpha1_KubeProxyNFTablesConfiguration_To_config_KubeProxyNFTablesConfiguration(in, out, s)
}

// Convert_config_DetectLocalConfiguration_To_v1alpha1_DetectLocalConfiguration
// drops ClusterCIDRs, which v1alpha1 keeps at the top level as clusterCIDR.
func Convert_config_DetectLocalConfiguration_To_v1alpha1_DetectLocalConfiguration(in *config.DetectLocalConfiguration, out *configv1alpha1.DetectLocalConfiguration, s conversion.Scope) error {
	return autoConvert_config_DetectLocalConfiguration_To_v1alpha1_DetectLocalConfiguration(in, out, s)
}
