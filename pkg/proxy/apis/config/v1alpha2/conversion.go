package v1alpha2

import (
	"k8s.io/apimachinery/pkg/conversion"
	netutils "k8s.io/utils/net"

	configv1alpha2 "k8s.io/kube-proxy/config/v1alpha2"
	"k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// Convert_v1alpha2_KubeProxyConfiguration_To_config_KubeProxyConfiguration converts
// a v1alpha2 configuration to the internal form, deriving the internal BindAddress
// (upstream's primary-IP override) from nodeIPOverride.
func Convert_v1alpha2_KubeProxyConfiguration_To_config_KubeProxyConfiguration(in *configv1alpha2.KubeProxyConfiguration, out *config.KubeProxyConfiguration, s conversion.Scope) error {
	if err := autoConvert_v1alpha2_KubeProxyConfiguration_To_config_KubeProxyConfiguration(in, out, s); err != nil {
		return err
	}
	if len(in.NodeIPOverride) > 0 {
		out.BindAddress = in.NodeIPOverride[0]
	} else {
		// Upstream's "no override" value, which its validation requires to be an IP.
		out.BindAddress = "0.0.0.0"
	}
	out.LocalNode = config.KubeProxyLocalNodeConfiguration{}
	if in.LocalNode != nil {
		out.LocalNode = config.KubeProxyLocalNodeConfiguration(*in.LocalNode)
	}
	out.SocketLB = config.KubeProxySocketLBConfiguration{}
	if in.SocketLB != nil {
		out.SocketLB = config.KubeProxySocketLBConfiguration(*in.SocketLB)
	}
	return nil
}

// Convert_config_KubeProxyConfiguration_To_v1alpha2_KubeProxyConfiguration converts
// the internal form to v1alpha2. A BindAddress naming a specific IP becomes the
// only nodeIPOverride unless NodeIPOverride is already set.
func Convert_config_KubeProxyConfiguration_To_v1alpha2_KubeProxyConfiguration(in *config.KubeProxyConfiguration, out *configv1alpha2.KubeProxyConfiguration, s conversion.Scope) error {
	if err := autoConvert_config_KubeProxyConfiguration_To_v1alpha2_KubeProxyConfiguration(in, out, s); err != nil {
		return err
	}
	if len(out.NodeIPOverride) == 0 {
		if ip := netutils.ParseIPSloppy(in.BindAddress); ip != nil && !ip.IsUnspecified() {
			out.NodeIPOverride = []string{in.BindAddress}
		}
	}
	// Left out when unset, so that files which do not use it do not grow an empty
	// section.
	out.LocalNode = nil
	if in.LocalNode != (config.KubeProxyLocalNodeConfiguration{}) {
		ln := configv1alpha2.KubeProxyLocalNodeConfiguration(in.LocalNode)
		out.LocalNode = &ln
	}
	// Likewise: only a configuration that uses socket load balancing says so.
	out.SocketLB = nil
	if in.SocketLB != (config.KubeProxySocketLBConfiguration{}) {
		sl := configv1alpha2.KubeProxySocketLBConfiguration(in.SocketLB)
		out.SocketLB = &sl
	}
	return nil
}
