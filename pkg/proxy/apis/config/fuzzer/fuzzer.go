package fuzzer

import (
	"fmt"
	"net/netip"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// Funcs fills configurations that round-trip through v1alpha1 and v1alpha2 alike.
func Funcs(_ runtimeserializer.CodecFactory) []any {
	return []any{
		func(obj *config.KubeProxyConfiguration, c randfill.Continue) {
			fillCommon(obj, c)
			restrictToV1alpha1(obj)
			restrictToV1alpha2(obj, c, false)
		},
	}
}

// V1alpha1Funcs fills configurations that round-trip through v1alpha1.
func V1alpha1Funcs(_ runtimeserializer.CodecFactory) []any {
	return []any{
		func(obj *config.KubeProxyConfiguration, c randfill.Continue) {
			fillCommon(obj, c)
			obj.BindAddress = randomIP(c.Bool(), c)
			restrictToV1alpha1(obj)
		},
	}
}

// V1alpha2Funcs fills configurations that round-trip through v1alpha2.
func V1alpha2Funcs(_ runtimeserializer.CodecFactory) []any {
	return []any{
		func(obj *config.KubeProxyConfiguration, c randfill.Continue) {
			fillCommon(obj, c)
			restrictToV1alpha2(obj, c, true)
		},
	}
}

// fillCommon fills every field randomly, then makes the fields whose encoding is
// not free-form (addresses, CIDR lists) plausible.
func fillCommon(obj *config.KubeProxyConfiguration, c randfill.Continue) {
	c.FillNoCustom(obj)
	obj.BindAddress = "0.0.0.0"
	obj.ClientConnection.ContentType = "application/" + c.String(8)
	obj.DetectLocal.ClusterCIDRs = randomDualStackCIDRs(c)
	obj.Linux.Conntrack.MaxPerCore = ptr.To(c.Int31())
	obj.Linux.Conntrack.Min = ptr.To(c.Int31())
	obj.Linux.Conntrack.TCPCloseWaitTimeout = &metav1.Duration{Duration: time.Duration(c.Int63n(1000)) * time.Second}
	obj.Linux.Conntrack.TCPEstablishedTimeout = &metav1.Duration{Duration: time.Duration(c.Int63n(1000)) * time.Hour}
	obj.Linux.OOMScoreAdj = ptr.To(c.Int31n(2001) - 1000)
	obj.FeatureGates = map[string]bool{c.String(0): c.Bool()}
	obj.HealthzBindAddress = fmt.Sprintf("%s:%d", randomIP(false, c), c.Intn(65536))
	obj.MetricsBindAddress = fmt.Sprintf("%s:%d", randomIP(false, c), c.Intn(65536))
	obj.IPTables.MasqueradeBit = ptr.To(c.Int31n(32))
	obj.IPTables.LocalhostNodePorts = ptr.To(c.Bool())
	obj.IPVS.MasqueradeBit = ptr.To(c.Int31n(32))
	obj.NFTables.MasqueradeBit = ptr.To(c.Int31n(32))
	obj.NodePortAddresses = []string{randomCIDR(false, c)}
	obj.IPFamilyPolicy = []config.IPFamilyPolicy{
		config.IPFamilyPolicySingleStack, config.IPFamilyPolicyPreferDualStack, config.IPFamilyPolicyRequireDualStack,
	}[c.Intn(3)]
	if obj.Logging.Format == "" {
		obj.Logging.Format = "text"
	}
}

// restrictToV1alpha1 sets what v1alpha1 cannot express to what reading v1alpha1
// produces.
func restrictToV1alpha1(obj *config.KubeProxyConfiguration) {
	obj.NodeIPOverride = nil
	obj.IPFamilyPolicy = config.IPFamilyPolicyPreferDualStack
	obj.ConfigHardFail = false
	obj.LocalNode = config.KubeProxyLocalNodeConfiguration{}
	obj.SocketLB = config.KubeProxySocketLBConfiguration{}
	obj.IPVS.MasqueradeBit = ptr.To(*obj.IPTables.MasqueradeBit)
}

// restrictToV1alpha2 makes BindAddress what reading v1alpha2 derives from
// NodeIPOverride; withOverride says whether NodeIPOverride may be set at all.
func restrictToV1alpha2(obj *config.KubeProxyConfiguration, c randfill.Continue, withOverride bool) {
	obj.NodeIPOverride = nil
	obj.BindAddress = "0.0.0.0"
	if !withOverride {
		return
	}
	switch c.Intn(3) {
	case 1:
		obj.NodeIPOverride = []string{randomIP(c.Bool(), c)}
	case 2:
		v6 := c.Bool()
		obj.NodeIPOverride = []string{randomIP(v6, c), randomIP(!v6, c)}
	}
	if len(obj.NodeIPOverride) > 0 {
		obj.BindAddress = obj.NodeIPOverride[0]
	}
}

func randomIP(v6 bool, c randfill.Continue) string {
	b := make([]byte, 4)
	if v6 {
		b = make([]byte, 16)
	}
	for i := range b {
		b[i] = byte(c.Intn(256))
	}
	ip, _ := netip.AddrFromSlice(b)
	return ip.String()
}

func randomCIDR(v6 bool, c randfill.Continue) string {
	ip := netip.MustParseAddr(randomIP(v6, c))
	return netip.PrefixFrom(ip, c.Intn(ip.BitLen()+1)).Masked().String()
}

// randomDualStackCIDRs returns one CIDR or a dual-stack pair, in either order.
func randomDualStackCIDRs(c randfill.Continue) []string {
	cidrs := []string{randomCIDR(false, c), randomCIDR(true, c)}
	if c.Bool() {
		cidrs[0], cidrs[1] = cidrs[1], cidrs[0]
	}
	return cidrs[:1+c.Intn(2)]
}
