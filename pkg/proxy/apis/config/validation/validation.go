package validation

import (
	"fmt"
	"net"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"k8s.io/kube-proxy/pkg/features"
	"k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// Validate returns every problem in cfg. Feature-gated rules (the ipvs mode needs
// KubeProxyIPVS) see the process' gates with cfg.FeatureGates applied on top, which
// is what the binary runs with.
func Validate(cfg *config.KubeProxyConfiguration) field.ErrorList {
	return validate(cfg, runtime.GOOS, features.DefaultMutableFeatureGate)
}

// validate is Validate for a given platform and base gate, so tests can check the
// Windows rules on Linux and run with private gates.
func validate(cfg *config.KubeProxyConfiguration, goos string, baseGate featuregate.MutableVersionedFeatureGate) field.ErrorList {
	var errs field.ErrorList
	root := field.NewPath("KubeProxyConfiguration")

	gate := baseGate.DeepCopy()
	// The zero Logger discards: skipped gates are the binary's to log, once.
	if err := features.SetGateFromMap(klog.Logger{}, gate, cfg.FeatureGates); err != nil {
		errs = append(errs, field.Invalid(root.Child("featureGates"), cfg.FeatureGates, err.Error()))
	}

	errs = append(errs, validateMasqueradeBit(cfg.IPTables.MasqueradeBit, root.Child("KubeProxyIPTablesConfiguration", "MasqueradeBit"))...)
	switch cfg.Mode {
	case config.ProxyModeIPVS:
		errs = append(errs, validateIPVS(&cfg.IPVS, root.Child("KubeProxyIPVSConfiguration"))...)
	case config.ProxyModeNFTables:
		errs = append(errs, validateMasqueradeBit(cfg.NFTables.MasqueradeBit, root.Child("KubeProxyNFTablesConfiguration", "MasqueradeBit"))...)
	}
	errs = append(errs, validateLinux(&cfg.Linux, root.Child("KubeProxyLinuxConfiguration"))...)
	errs = append(errs, validateProxyMode(cfg.Mode, goos, gate, root.Child("Mode"))...)
	errs = append(errs, validateClientConnection(&cfg.ClientConnection, root.Child("ClientConnection"))...)

	if cfg.ConfigSyncPeriod.Duration <= 0 {
		errs = append(errs, field.Invalid(root.Child("ConfigSyncPeriod"), cfg.ConfigSyncPeriod, "must be greater than 0"))
	}
	if cfg.SyncPeriod.Duration <= 0 {
		errs = append(errs, field.Invalid(root.Child("SyncPeriod"), cfg.SyncPeriod, "must be greater than 0"))
	}
	if cfg.MinSyncPeriod.Duration < 0 {
		errs = append(errs, field.Invalid(root.Child("MinSyncPeriod"), cfg.MinSyncPeriod, "must be greater than or equal to 0"))
	}
	if cfg.MinSyncPeriod.Duration > cfg.SyncPeriod.Duration {
		// Reported on SyncPeriod, as upstream does, but with SyncPeriod's own value
		// and the minimum it falls short of: upstream shows MinSyncPeriod's value
		// here, which reads as if the minimum itself were wrong.
		errs = append(errs, field.Invalid(root.Child("SyncPeriod"), cfg.SyncPeriod,
			fmt.Sprintf("must be greater than or equal to %s (%s)", root.Child("MinSyncPeriod"), cfg.MinSyncPeriod.Duration)))
	}

	// With NodeIPOverride set, BindAddress is derived from it and validated there.
	if len(cfg.NodeIPOverride) == 0 && netutils.ParseIPSloppy(cfg.BindAddress) == nil {
		errs = append(errs, field.Invalid(root.Child("BindAddress"), cfg.BindAddress, "not a valid textual representation of an IP address"))
	}
	if cfg.HealthzBindAddress != "" {
		errs = append(errs, validateHostPort(cfg.HealthzBindAddress, root.Child("HealthzBindAddress"))...)
	}
	errs = append(errs, validateHostPort(cfg.MetricsBindAddress, root.Child("MetricsBindAddress"))...)

	errs = append(errs, validateNodePortAddresses(cfg.NodePortAddresses, root.Child("NodePortAddresses"))...)
	for _, err := range metrics.ValidateShowHiddenMetricsVersion(cfg.ShowHiddenMetricsForVersion) {
		errs = append(errs, field.Invalid(root.Child("ShowHiddenMetricsForVersion"), cfg.ShowHiddenMetricsForVersion, err.Error()))
	}

	errs = append(errs, validateDetectLocalMode(cfg.DetectLocalMode, root.Child("DetectLocalMode"))...)
	errs = append(errs, validateDetectLocal(cfg.DetectLocalMode, &cfg.DetectLocal, root.Child("DetectLocalConfiguration"))...)
	errs = append(errs, logsapi.Validate(&cfg.Logging, gate, root.Child("logging"))...)

	errs = append(errs, validateNodeIPOverride(cfg.NodeIPOverride, cfg.IPFamilyPolicy, root)...)
	errs = append(errs, validateSocketLB(&cfg.SocketLB, cfg.Mode, goos, root.Child("SocketLB"))...)
	return errs
}

// validateSocketLB checks the socket load balancer's settings. The messages name the
// v1alpha2 field and the flag as well, since either may have set the value.
func validateSocketLB(c *config.KubeProxySocketLBConfiguration, mode config.ProxyMode, goos string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.CgroupPath != "" {
		// A relative path would be resolved against kube-proxy's working directory,
		// and ".." could climb out of the hierarchy: neither names a cgroup reliably.
		if !path.IsAbs(c.CgroupPath) || path.Clean(c.CgroupPath) != c.CgroupPath {
			errs = append(errs, field.Invalid(fldPath.Child("CgroupPath"), c.CgroupPath,
				"must be an absolute, clean path to a cgroup v2 directory (socketLB.cgroupPath, --socket-lb-cgroup-path)"))
		}
		if !c.Enabled {
			errs = append(errs, field.Invalid(fldPath.Child("CgroupPath"), c.CgroupPath,
				"requires socket load balancing to be enabled (socketLB.enabled: true, --socket-lb)"))
		}
	}
	if !c.Enabled {
		return errs
	}
	switch {
	case goos == "windows":
		errs = append(errs, field.Invalid(fldPath.Child("Enabled"), c.Enabled,
			"socket load balancing (socketLB.enabled, --socket-lb) needs Linux cgroup BPF programs"))
	case mode != "" && mode != config.ProxyModeNFTables && mode != config.ProxyModeIPTables:
		// Blank is the Linux default, iptables. The hooks see only this node's
		// clients, so a packet-level mode must handle everything else.
		errs = append(errs, field.Invalid(fldPath.Child("Enabled"), c.Enabled,
			fmt.Sprintf("socket load balancing (socketLB.enabled, --socket-lb) requires mode nftables or iptables (--proxy-mode), not %q: the socket hooks only see this node's clients", mode)))
	}
	return errs
}

// ValidateNonnegativeField reports value < 0 as invalid. It replaces upstream's
// helper of the same name in k8s.io/kubernetes/pkg/apis/core/validation.
func ValidateNonnegativeField(value int64, fldPath *field.Path) field.ErrorList {
	if value < 0 {
		return field.ErrorList{field.Invalid(fldPath, value, "must be greater than or equal to 0")}
	}
	return nil
}

func validateMasqueradeBit(bit *int32, fldPath *field.Path) field.ErrorList {
	if bit != nil && (*bit < 0 || *bit > 31) {
		return field.ErrorList{field.Invalid(fldPath, *bit, "must be within the range [0, 31]")}
	}
	return nil
}

func validateIPVS(c *config.KubeProxyIPVSConfiguration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateNonnegativeDuration(c.TCPTimeout.Duration, fldPath.Child("TCPTimeout"))...)
	errs = append(errs, validateNonnegativeDuration(c.TCPFinTimeout.Duration, fldPath.Child("TCPFinTimeout"))...)
	errs = append(errs, validateNonnegativeDuration(c.UDPTimeout.Duration, fldPath.Child("UDPTimeout"))...)
	for i, cidr := range c.ExcludeCIDRs {
		if _, _, err := netutils.ParseCIDRSloppy(cidr); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("ExcludeCidrs").Index(i), cidr, "must be a valid CIDR"))
		}
	}
	errs = append(errs, validateMasqueradeBit(c.MasqueradeBit, fldPath.Child("MasqueradeBit"))...)
	return errs
}

func validateLinux(c *config.KubeProxyLinuxConfiguration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	ct := &c.Conntrack
	ctPath := fldPath.Child("KubeProxyConntrackConfiguration")
	if ct.MaxPerCore != nil && *ct.MaxPerCore < 0 {
		errs = append(errs, field.Invalid(ctPath.Child("MaxPerCore"), *ct.MaxPerCore, "must be greater than or equal to 0"))
	}
	if ct.Min != nil && *ct.Min < 0 {
		errs = append(errs, field.Invalid(ctPath.Child("Min"), *ct.Min, "must be greater than or equal to 0"))
	}
	// Upstream dereferences these unconditionally, trusting defaulting; a nil here
	// means "leave the kernel's value", so it is simply not checked.
	if ct.TCPEstablishedTimeout != nil {
		errs = append(errs, validateNonnegativeDuration(ct.TCPEstablishedTimeout.Duration, ctPath.Child("TCPEstablishedTimeout"))...)
	}
	if ct.TCPCloseWaitTimeout != nil {
		errs = append(errs, validateNonnegativeDuration(ct.TCPCloseWaitTimeout.Duration, ctPath.Child("TCPCloseWaitTimeout"))...)
	}
	errs = append(errs, validateNonnegativeDuration(ct.UDPTimeout.Duration, ctPath.Child("UDPTimeout"))...)
	errs = append(errs, validateNonnegativeDuration(ct.UDPStreamTimeout.Duration, ctPath.Child("UDPStreamTimeout"))...)

	if c.OOMScoreAdj != nil && (*c.OOMScoreAdj < -1000 || *c.OOMScoreAdj > 1000) {
		errs = append(errs, field.Invalid(fldPath.Child("OOMScoreAdj"), *c.OOMScoreAdj, "must be within the range [-1000, 1000]"))
	}
	return errs
}

func validateNonnegativeDuration(d time.Duration, fldPath *field.Path) field.ErrorList {
	if d < 0 {
		return field.ErrorList{field.Invalid(fldPath, d.String(), "must be greater than or equal to 0")}
	}
	return nil
}

func validateProxyMode(mode config.ProxyMode, goos string, gate featuregate.FeatureGate, fldPath *field.Path) field.ErrorList {
	if mode == "" {
		return nil
	}
	var valid []string
	var blank string
	if goos == "windows" {
		valid = []string{string(config.ProxyModeKernelspace)}
		blank = "blank means the most-available proxy [currently 'kernelspace']"
	} else {
		valid = []string{string(config.ProxyModeIPTables), string(config.ProxyModeNFTables)}
		if gate.Enabled(features.KubeProxyIPVS) {
			valid = append(valid, string(config.ProxyModeIPVS))
		}
		slices.Sort(valid)
		blank = "blank means the best-available proxy [currently iptables]"
	}
	if slices.Contains(valid, string(mode)) {
		return nil
	}
	msg := fmt.Sprintf("must be %s or blank (%s)", strings.Join(valid, ", "), blank)
	switch {
	case goos == "windows":
		msg += "; " + string(mode) + " is a Linux mode"
	case mode == config.ProxyModeKernelspace:
		msg += "; kernelspace is the Windows mode"
	case mode == config.ProxyModeIPVS:
		msg += "; ipvs needs the KubeProxyIPVS feature gate"
	}
	return field.ErrorList{field.Invalid(fldPath.Child("ProxyMode"), string(mode), msg)}
}

func validateDetectLocalMode(mode config.LocalMode, fldPath *field.Path) field.ErrorList {
	valid := []string{
		string(config.LocalModeClusterCIDR),
		string(config.LocalModeNodeCIDR),
		string(config.LocalModeBridgeInterface),
		string(config.LocalModeInterfaceNamePrefix),
		"",
	}
	if slices.Contains(valid, string(mode)) {
		return nil
	}
	return field.ErrorList{field.NotSupported(fldPath, string(mode), valid)}
}

func validateDetectLocal(mode config.LocalMode, c *config.DetectLocalConfiguration, fldPath *field.Path) field.ErrorList {
	switch mode {
	case config.LocalModeBridgeInterface:
		if c.BridgeInterface == "" {
			return field.ErrorList{field.Invalid(fldPath.Child("InterfaceName"), c.BridgeInterface, "must not be empty")}
		}
	case config.LocalModeInterfaceNamePrefix:
		if c.InterfaceNamePrefix == "" {
			return field.ErrorList{field.Invalid(fldPath.Child("InterfacePrefix"), c.InterfaceNamePrefix, "must not be empty")}
		}
	case config.LocalModeClusterCIDR:
		if len(c.ClusterCIDRs) > 0 {
			return validateDualStackCIDRs(c.ClusterCIDRs, fldPath.Child("ClusterCIDRs"))
		}
	}
	return nil
}

const dualStackCIDRsMsg = "must be a either a single CIDR or dual-stack pair of CIDRs (e.g. [10.100.0.0/16, fde4:8dba:82e1::/48]"

func validateDualStackCIDRs(cidrs []string, fldPath *field.Path) field.ErrorList {
	if len(cidrs) > 2 {
		return field.ErrorList{field.Invalid(fldPath, cidrs, dualStackCIDRsMsg)}
	}
	var errs field.ErrorList
	for i, cidr := range cidrs {
		if _, _, err := netutils.ParseCIDRSloppy(cidr); err != nil {
			errs = append(errs, field.Invalid(fldPath.Index(i), cidr, "must be a valid CIDR block (e.g. 10.100.0.0/16 or fde4:8dba:82e1::/48)"))
		}
	}
	if len(errs) == 0 && len(cidrs) == 2 {
		if dual, err := netutils.IsDualStackCIDRStrings(cidrs); err == nil && !dual {
			errs = append(errs, field.Invalid(fldPath, cidrs, dualStackCIDRsMsg))
		}
	}
	return errs
}

func validateClientConnection(c *componentbaseconfig.ClientConnectionConfiguration, fldPath *field.Path) field.ErrorList {
	return ValidateNonnegativeField(int64(c.Burst), fldPath.Child("Burst"))
}

func validateHostPort(input string, fldPath *field.Path) field.ErrorList {
	host, port, err := net.SplitHostPort(input)
	if err != nil {
		return field.ErrorList{field.Invalid(fldPath, input, "must be IP:port")}
	}
	var errs field.ErrorList
	if netutils.ParseIPSloppy(host) == nil {
		errs = append(errs, field.Invalid(fldPath, host, "must be a valid IP"))
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		errs = append(errs, field.Invalid(fldPath, port, "must be a valid port"))
	}
	return errs
}

func validateNodePortAddresses(addrs []string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, a := range addrs {
		switch a {
		case config.NodePortAddressesPrimary, config.NodePortAddressesLocalhost, config.NodePortAddressesAll:
			if seen.Has(a) {
				errs = append(errs, field.Duplicate(fldPath.Index(i), a))
			}
			seen.Insert(a)
			continue
		}
		if _, _, err := netutils.ParseCIDRSloppy(a); err != nil {
			errs = append(errs, field.Invalid(fldPath.Index(i), a, "must be a valid CIDR or one of the keywords 'primary', 'localhost', 'all'"))
		}
	}
	return errs
}

var ipFamilyPolicies = []string{
	string(config.IPFamilyPolicySingleStack),
	string(config.IPFamilyPolicyPreferDualStack),
	string(config.IPFamilyPolicyRequireDualStack),
}

// validateNodeIPOverride checks NodeIPOverride and IPFamilyPolicy, which only
// make sense together: the override fixes the families the node has.
func validateNodeIPOverride(ips []string, policy config.IPFamilyPolicy, root *field.Path) field.ErrorList {
	var errs field.ErrorList
	policyPath := root.Child("IPFamilyPolicy")
	if policy != "" && !slices.Contains(ipFamilyPolicies, string(policy)) {
		errs = append(errs, field.NotSupported(policyPath, string(policy), ipFamilyPolicies))
	}

	fldPath := root.Child("NodeIPOverride")
	if len(ips) > 2 {
		return append(errs, field.TooMany(fldPath, len(ips), 2))
	}
	parsed := make([]net.IP, 0, len(ips))
	for i, s := range ips {
		ip := netutils.ParseIPSloppy(s)
		switch {
		case ip == nil:
			errs = append(errs, field.Invalid(fldPath.Index(i), s, "must be a valid IP address"))
		case ip.IsUnspecified():
			errs = append(errs, field.Invalid(fldPath.Index(i), s, "must be a specific node IP, not the unspecified address"))
		default:
			parsed = append(parsed, ip)
		}
	}
	if len(parsed) != len(ips) {
		return errs
	}
	if len(parsed) == 2 && netutils.IsIPv6(parsed[0]) == netutils.IsIPv6(parsed[1]) {
		errs = append(errs, field.Invalid(fldPath, ips, "two addresses must be one IPv4 and one IPv6 address"))
		return errs
	}
	switch {
	case policy == config.IPFamilyPolicySingleStack && len(ips) == 2:
		errs = append(errs, field.Invalid(fldPath, ips, "ipFamilyPolicy SingleStack takes a single node IP"))
	case policy == config.IPFamilyPolicyRequireDualStack && len(ips) == 1:
		errs = append(errs, field.Invalid(fldPath, ips, "ipFamilyPolicy RequireDualStack needs an IPv4 and an IPv6 node IP"))
	}
	return errs
}
