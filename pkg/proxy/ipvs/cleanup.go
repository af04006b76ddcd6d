//go:build linux

package ipvs

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	utilipset "k8s.io/net-utils/ipset"
	utiliptables "k8s.io/net-utils/iptables"
	utilipvs "k8s.io/net-utils/ipvs"
)

// CleanupLeftovers removes what IPVS mode programs: every virtual server,
// kube-ipvs0, the iptables chains and jumps of both families and the ip
// sets. On a kernel without IPVS there is nothing to remove. It reports
// whether something failed.
func CleanupLeftovers(ctx context.Context) (encounteredError bool) {
	if err := utilipvs.Available(); err != nil {
		klog.FromContext(ctx).V(2).Info("IPVS not available, nothing to clean up", "reason", err)
		return false
	}
	// Every backend that may hold ipvs mode's chains: the mode ran on whichever the
	// host used then, which need not be the one detected now.
	return cleanupLeftovers(ctx, utilipvs.New(), utiliptables.NewBestEffortEveryBackend(), utilipset.New(), NewNetLinkHandle(false), nil)
}

// cleanupLeftovers flushes IPVS, except that virtual servers inside
// excludeCIDRs are kept (nil: none is).
func cleanupLeftovers(ctx context.Context, ipvs utilipvs.Interface, ipts []utiliptables.Interface,
	ipset utilipset.Interface, nl NetLinkHandle, excludeCIDRs []string) (encounteredError bool) {
	logger := klog.FromContext(ctx)
	if ipvs != nil {
		if err := flushIPVS(ipvs, excludeCIDRs); err != nil {
			logger.Error(err, "Error flushing ipvs rules")
			encounteredError = true
		}
	}
	if err := nl.DeleteDummyDevice(defaultDummyDevice); err != nil {
		logger.Error(err, "Error deleting dummy device created by ipvs proxier", "device", defaultDummyDevice)
		encounteredError = true
	}
	for _, ipt := range ipts {
		encounteredError = cleanupIptablesLeftovers(ctx, ipt) || encounteredError
	}
	if _, err := ipset.GetVersion(); err == nil {
		for _, info := range ipsetInfo {
			for _, name := range []string{info.name, ipv6SetName(info.name)} {
				if err := ipset.DestroySet(name); err != nil && !utilipset.IsNotFoundError(err) {
					logger.Error(err, "Error removing ipset", "ipset", name)
					encounteredError = true
				}
			}
		}
	}
	return encounteredError
}

func flushIPVS(ipvs utilipvs.Interface, excludeCIDRs []string) error {
	if len(excludeCIDRs) == 0 {
		return ipvs.Flush()
	}
	v4, err := parseExcludeCIDRs(v1.IPv4Protocol, excludeCIDRs)
	if err != nil {
		return err
	}
	v6, err := parseExcludeCIDRs(v1.IPv6Protocol, excludeCIDRs)
	if err != nil {
		return err
	}
	vss, err := ipvs.GetVirtualServers()
	if err != nil {
		return err
	}
	var errs []error
vs:
	for _, vs := range vss {
		for _, n := range append(v4, v6...) {
			if n.Contains(vs.Address) {
				continue vs
			}
		}
		if err := ipvs.DeleteVirtualServer(vs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func cleanupIptablesLeftovers(ctx context.Context, ipt utiliptables.Interface) (encounteredError bool) {
	logger := klog.FromContext(ctx)
	for _, jc := range iptablesJumpChains {
		// The rule exactly as linkChains inserts it.
		if err := ipt.DeleteRule(jc.Table, jc.Src, jc.Args()...); err != nil && !utiliptables.IsNotFoundError(err) {
			logger.Error(err, "Error removing iptables rules in ipvs proxier")
			encounteredError = true
		}
	}
	// Flush all before deleting any: the chains jump to each other.
	for _, ch := range iptablesChains {
		if err := ipt.FlushChain(ch.Table, ch.Chain); err != nil && !utiliptables.IsNotFoundError(err) {
			logger.Error(err, "Error removing iptables rules in ipvs proxier")
			encounteredError = true
		}
	}
	for _, ch := range iptablesChains {
		if err := ipt.DeleteChain(ch.Table, ch.Chain); err != nil && !utiliptables.IsNotFoundError(err) {
			logger.Error(err, "Error removing iptables rules in ipvs proxier")
			encounteredError = true
		}
	}
	return encounteredError
}
