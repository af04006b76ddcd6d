//go:build linux

package app

import (
	"context"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/features"
	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/ebpf"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// startSocketLB attaches the socket load balancer and feeds it from a source of its own
// on the same client, as the node-local state server does, so the proxier is
// untouched. A kernel without what it needs fails start-up with the missing feature
// named, and nothing attached.
func (s *ProxyServer) startSocketLB(ctx context.Context, o socketLBOptions) error {
	if !o.enabled {
		return nil
	}
	logger := klog.FromContext(ctx)
	dp, err := ebpf.Open(ebpf.Config{CgroupPath: o.cgroupPath, PinPath: o.pinPath})
	if err != nil {
		return fmt.Errorf("--socket-lb: %w", err)
	}
	var nodeIPs []netip.Addr
	for _, ip := range s.NodeIPs {
		if a, ok := netip.AddrFromSlice(ip); ok && !a.Unmap().IsUnspecified() {
			nodeIPs = append(nodeIPs, a.Unmap())
		}
	}
	families := []localnode.Family{localnode.IPv4, localnode.IPv6}
	if s.PrimaryIPFamily == v1.IPv6Protocol {
		families = []localnode.Family{localnode.IPv6, localnode.IPv4}
	}
	src := source.NewKubernetes(s.Client, s.NodeName, s.Config.ConfigSyncPeriod.Duration)
	if !features.DefaultFeatureGate.Enabled(features.MultiCIDRServiceAllocator) {
		src.WithoutServiceCIDRs()
	}
	b := backend.NewDiffer(ebpf.NewBackend(dp.Maps(), nodeIPs, dp.Adopted))
	cgroup := o.cgroupPath
	if cgroup == "" {
		// What Open attached to: the unified root, which it found the same way.
		cgroup, _ = ebpf.UnifiedCgroupRoot()
	}
	logger.Info("Socket load balancing attached", "cgroup", cgroup, "nodeIPs", nodeIPs)
	go func() {
		// Closing leaves the programs attached and the maps pinned, for the next start.
		defer dp.Close()
		err := proxyrun.Run(ctx, src, b, proxyrun.Options{NodeName: s.NodeName, Families: families,
			MinSyncInterval: s.Config.MinSyncPeriod.Duration})
		if err != nil && ctx.Err() == nil {
			logger.Error(err, "Socket load balancing stopped")
		}
	}()
	return nil
}

// cleanupSocketLB detaches the socket load balancer's programs pinned under pinPath
// (empty: ebpf.DefaultPinPath) and removes its pins: at --cleanup, and at a start
// without --socket-lb, when an earlier run with it left them. It logs what it found and
// reports whether removing it failed, as the other cleanups do.
func cleanupSocketLB(ctx context.Context, pinPath string) bool {
	logger := klog.FromContext(ctx)
	if pinPath == "" {
		pinPath = ebpf.DefaultPinPath
	}
	pinned, err := ebpf.Pinned(pinPath)
	if err != nil {
		logger.Error(err, "Listing the socket load balancer's pins")
		return true
	}
	if len(pinned) == 0 {
		logger.V(2).Info("No socket load balancer to remove", "pinPath", pinPath)
		return false
	}
	logger.Info("Removing the socket load balancer pinned by an earlier run: detaching its programs and deleting its maps", "pinPath", pinPath, "pinned", pinned)
	if err := ebpf.Cleanup(pinPath); err != nil {
		logger.Error(err, "Removing the socket load balancer", "pinPath", pinPath)
		return true
	}
	return false
}
