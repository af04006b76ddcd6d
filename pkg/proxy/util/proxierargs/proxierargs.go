package proxierargs

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// DefaultMasqueradeBit is the masquerade bit when the configuration names
// none, as upstream's iptables.masqueradeBit and nftables.masqueradeBit
// default.
const DefaultMasqueradeBit = 14

// Check returns the error a mode's constructor returns for a nil
// configuration or an IP family other than IPv4 and IPv6; mode names the
// proxier in the message ("iptables").
func Check(mode string, config *kubeproxyconfig.KubeProxyConfiguration, ipFamily v1.IPFamily) error {
	if config == nil {
		return fmt.Errorf("%s proxier (%s): nil configuration", mode, ipFamily)
	}
	if ipFamily != v1.IPv4Protocol && ipFamily != v1.IPv6Protocol {
		return fmt.Errorf("%s proxier: invalid IP family %q", mode, ipFamily)
	}
	return nil
}

// MasqueradeMark returns the masquerade bit (DefaultMasqueradeBit when bit
// is nil) and the packet mark it sets, spelled as the rules carry it
// ("0x00004000"). field names the configuration field in the error for a bit
// outside [0, 31], which no 32-bit mark can hold.
func MasqueradeMark(mode string, ipFamily v1.IPFamily, field string, bit *int32) (int, string, error) {
	b := int32(DefaultMasqueradeBit)
	if bit != nil {
		b = *bit
	}
	if b < 0 || b > 31 {
		return 0, "", fmt.Errorf("%s proxier (%s): %s %d out of range [0, 31]", mode, ipFamily, field, b)
	}
	return int(b), fmt.Sprintf("%#08x", uint32(1)<<uint(b)), nil
}
