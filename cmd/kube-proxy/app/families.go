package app

// Which IP families this node proxies, its IP in each, and the configuration checks
// that depend on them: decided once for every proxy mode.

import (
	"context"
	"errors"
	"fmt"
	"net"

	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// setNodeIPs picks the node IP of each family and the primary family, from the Node (or
// nodeIPOverride) and bindAddress, and expands the nodePortAddresses keywords with them.
func (s *ProxyServer) setNodeIPs(ctx context.Context) {
	logger := klog.FromContext(ctx)
	rawNodeIPs := s.NodeManager.NodeIPs()
	if len(rawNodeIPs) > 0 {
		logger.Info("Successfully retrieved NodeIPs", "NodeIPs", rawNodeIPs)
	}
	if len(s.Config.NodeIPOverride) > 0 {
		rawNodeIPs = nil
		for _, ip := range s.Config.NodeIPOverride {
			if parsed := netutils.ParseIPSloppy(ip); parsed != nil {
				rawNodeIPs = append(rawNodeIPs, parsed)
			}
		}
		logger.Info("Using nodeIPOverride instead of the Node's IPs", "NodeIPs", rawNodeIPs)
	}
	s.PrimaryIPFamily, s.NodeIPs = detectNodeIPs(ctx, rawNodeIPs, s.Config.BindAddress)
	s.podCIDRs = s.NodeManager.PodCIDRs()

	s.Config.NodePortAddresses = expandNodePortAddressKeywords(s.Config.NodePortAddresses, s.NodeIPs)
}

// decideDualStack reports whether this node proxies both IP families (see
// chooseDualStack), from what the host supports for the mode.
func (s *ProxyServer) decideDualStack(ctx context.Context) (bool, error) {
	ipv4Supported, ipv6Supported, dualStackSupported, err := s.platformCheckSupported(ctx)
	if err != nil {
		return false, err
	}
	dualStack, err := chooseDualStack(s.PrimaryIPFamily, s.Config.IPFamilyPolicy, ipv4Supported, ipv6Supported, dualStackSupported)
	if err != nil {
		return false, err
	}
	logger := klog.FromContext(ctx)
	if dualStack {
		logger.Info("kube-proxy running in dual-stack mode", "primary ipFamily", s.PrimaryIPFamily)
	} else {
		logger.Info("kube-proxy running in single-stack mode", "ipFamily", s.PrimaryIPFamily)
	}
	return dualStack, nil
}

// chooseDualStack narrows what the host supports by ipFamilyPolicy. It fails when the
// primary family is unsupported, or when the policy requires dual-stack and the host
// cannot do it.
func chooseDualStack(primary v1.IPFamily, policy kubeproxyconfig.IPFamilyPolicy, ipv4Supported, ipv6Supported, dualStackSupported bool) (bool, error) {
	if (primary == v1.IPv4Protocol && !ipv4Supported) || (primary == v1.IPv6Protocol && !ipv6Supported) {
		return false, fmt.Errorf("no support for primary IP family %q", primary)
	}
	switch policy {
	case kubeproxyconfig.IPFamilyPolicySingleStack:
		return false, nil
	case kubeproxyconfig.IPFamilyPolicyRequireDualStack:
		if !dualStackSupported {
			return false, fmt.Errorf("ipFamilyPolicy %s: this host cannot proxy both IPv4 (supported: %v) and IPv6 (supported: %v)",
				policy, ipv4Supported, ipv6Supported)
		}
	}
	return dualStackSupported, nil
}

// checkBadConfig reports configuration that is legal but probably not intended.
func checkBadConfig(s *ProxyServer) error {
	var errs []error
	// Nothing has been seen of Services yet, so explicitly dual-stack settings are
	// the only hint that the cluster is dual-stack.
	anyDualStackConfig := false
	for _, cidrs := range [][]string{s.Config.DetectLocal.ClusterCIDRs, s.Config.NodePortAddresses, s.Config.IPVS.ExcludeCIDRs, s.podCIDRs} {
		if dual, _ := netutils.IsDualStackCIDRStrings(cidrs); dual {
			anyDualStackConfig = true
			break
		}
	}
	byFamily := proxyutil.MapCIDRsByIPFamily(s.Config.NodePortAddresses)
	other := proxyutil.OtherIPFamily(s.PrimaryIPFamily)
	switch {
	case len(s.Config.NodePortAddresses) == 0:
		errs = append(errs, errors.New("nodePortAddresses is unset; NodePort connections will be accepted on all local IPs. Consider using `--nodeport-addresses primary`"))
	case anyDualStackConfig && len(byFamily[s.PrimaryIPFamily]) == len(s.Config.NodePortAddresses):
		errs = append(errs, fmt.Errorf("cluster appears to be dual-stack but nodePortAddresses contains only %s addresses; NodePort connections will be accepted on all local %s IPs", s.PrimaryIPFamily, other))
	case len(byFamily[s.PrimaryIPFamily]) == 0:
		errs = append(errs, fmt.Errorf("cluster appears to be %s-primary but nodePortAddresses contains only %s addresses; NodePort connections will be accepted on all local %s IPs", s.PrimaryIPFamily, other, s.PrimaryIPFamily))
	}
	return utilerrors.NewAggregate(errs)
}

// checkBadIPConfig reports settings of the wrong IP family. Only the mismatches that
// upstream always treated as fatal are fatal.
func checkBadIPConfig(s *ProxyServer, dualStackSupported bool) (err error, fatal bool) {
	var errs []error
	bad := netutils.IPv6
	if s.PrimaryIPFamily == v1.IPv6Protocol {
		bad = netutils.IPv4
	}
	clusterType := fmt.Sprintf("%s-only", s.PrimaryIPFamily)
	if dualStackSupported {
		clusterType = fmt.Sprintf("%s-primary", s.PrimaryIPFamily)
	}
	if allOfFamily(s.Config.DetectLocal.ClusterCIDRs, bad) {
		errs = append(errs, fmt.Errorf("cluster is %s but clusterCIDRs contains only IPv%s addresses", clusterType, bad))
		if s.Config.DetectLocalMode == kubeproxyconfig.LocalModeClusterCIDR && !dualStackSupported {
			fatal = true
		}
	}
	if allOfFamily(s.podCIDRs, bad) {
		errs = append(errs, fmt.Errorf("cluster is %s but node.spec.podCIDRs contains only IPv%s addresses", clusterType, bad))
		if s.Config.DetectLocalMode == kubeproxyconfig.LocalModeNodeCIDR {
			fatal = true
		}
	}
	if netutils.IPFamilyOfString(s.Config.Winkernel.SourceVip) == bad {
		errs = append(errs, fmt.Errorf("cluster is %s but winkernel.sourceVip is IPv%s", clusterType, bad))
	}
	if !dualStackSupported {
		if allOfFamily(s.Config.IPVS.ExcludeCIDRs, bad) {
			errs = append(errs, fmt.Errorf("cluster is %s but ipvs.excludeCIDRs contains only IPv%s addresses", clusterType, bad))
		}
		if bindAddressOfFamily(s.Config.HealthzBindAddress, bad) {
			errs = append(errs, fmt.Errorf("cluster is %s but healthzBindAddress is IPv%s", clusterType, bad))
		}
		if bindAddressOfFamily(s.Config.MetricsBindAddress, bad) {
			errs = append(errs, fmt.Errorf("cluster is %s but metricsBindAddress is IPv%s", clusterType, bad))
		}
	}
	return utilerrors.NewAggregate(errs), fatal
}

// allOfFamily reports whether cidrs is non-empty and every CIDR is of family.
func allOfFamily(cidrs []string, family netutils.IPFamily) bool {
	if len(cidrs) == 0 {
		return false
	}
	for _, c := range cidrs {
		if netutils.IPFamilyOfCIDRString(c) != family {
			return false
		}
	}
	return true
}

// bindAddressOfFamily reports whether an "IP:port" names a specific IP of family.
func bindAddressOfFamily(addr string, family netutils.IPFamily) bool {
	host, _, _ := net.SplitHostPort(addr)
	ip := netutils.ParseIPSloppy(host)
	return ip != nil && !ip.IsUnspecified() && netutils.IPFamilyOf(ip) == family
}

// expandNodePortAddressKeywords turns primary/localhost/all into CIDRs.
func expandNodePortAddressKeywords(addrs []string, nodeIPs map[v1.IPFamily]net.IP) []string {
	var out []string
	for _, addr := range addrs {
		switch addr {
		case kubeproxyconfig.NodePortAddressesPrimary:
			// A loopback node IP means the real one is unknown; there is nothing to pin to.
			if ip := nodeIPs[v1.IPv4Protocol]; ip != nil && !ip.IsLoopback() {
				out = append(out, ip.String()+"/32")
			}
			if ip := nodeIPs[v1.IPv6Protocol]; ip != nil && !ip.IsLoopback() {
				out = append(out, ip.String()+"/128")
			}
		case kubeproxyconfig.NodePortAddressesLocalhost:
			out = append(out, "127.0.0.0/8", "::1/128")
		case kubeproxyconfig.NodePortAddressesAll:
			out = append(out, proxyutil.IPv4ZeroCIDR, proxyutil.IPv6ZeroCIDR)
		default:
			out = append(out, addr)
		}
	}
	return out
}

// detectNodeIPs picks the node IP per family: a specific --bind-address wins for its
// family, then the Node's IPs, then loopback. The primary family is that of the
// bind address, else of the Node's first IP, else IPv4.
func detectNodeIPs(ctx context.Context, rawNodeIPs []net.IP, bindAddress string) (v1.IPFamily, map[v1.IPFamily]net.IP) {
	logger := klog.FromContext(ctx)
	familyOf := func(ip net.IP) v1.IPFamily {
		if netutils.IsIPv4(ip) {
			return v1.IPv4Protocol
		}
		return v1.IPv6Protocol
	}
	primary := v1.IPv4Protocol
	nodeIPs := map[v1.IPFamily]net.IP{
		v1.IPv4Protocol: net.IPv4(127, 0, 0, 1),
		v1.IPv6Protocol: net.IPv6loopback,
	}
	if len(rawNodeIPs) > 0 {
		primary = familyOf(rawNodeIPs[0])
		nodeIPs[primary] = rawNodeIPs[0]
		// A second IP counts only if it is of the other family.
		if len(rawNodeIPs) > 1 && familyOf(rawNodeIPs[1]) != primary {
			nodeIPs[familyOf(rawNodeIPs[1])] = rawNodeIPs[1]
		}
	}
	if bindIP := netutils.ParseIPSloppy(bindAddress); bindIP != nil && !bindIP.IsUnspecified() {
		primary = familyOf(bindIP)
		nodeIPs[primary] = bindIP
	}
	if nodeIPs[primary].IsLoopback() {
		logger.Info("Can't determine this node's IP, assuming loopback; if this is incorrect, please set the --bind-address flag")
	}
	return primary, nodeIPs
}
