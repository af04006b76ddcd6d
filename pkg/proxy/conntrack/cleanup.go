//go:build linux

package conntrack

import (
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
)

// addrPort identifies a service frontend or an endpoint.
type addrPort = netip.AddrPort

// endpointSet is the set of serving endpoints of one UDP service port.
type endpointSet map[addrPort]struct{}

// CleanStaleEntries deletes UDP conntrack entries that would keep sending
// traffic to an endpoint the service no longer has.
//
// UDP has no connection teardown: a flow DNATed to an endpoint that went away
// keeps matching its conntrack entry, and the client's packets keep going to
// the dead endpoint until the entry times out. After a sync, every UDP flow
// to a service IP (cluster IP, load-balancer VIP, external IP) or UDP node
// port whose reply source is not among that service port's serving endpoints
// is deleted. Node ports are only matched while the port has endpoints, since
// without any the node port's traffic is rejected and there is nothing to
// redirect.
//
// Errors are logged, not returned: a failed cleanup only delays convergence
// until the next sync or the entries' timeout.
func CleanStaleEntries(ct Interface, ipFamily v1.IPFamily, svcPortMap proxy.ServicePortMap, endpointsMap proxy.EndpointsMap) {
	start := time.Now()
	logger := klog.Background()
	logger.V(4).Info("Started to reconcile conntrack entries", "ipFamily", ipFamily)

	family := uint8(unix.AF_INET)
	if ipFamily == v1.IPv6Protocol {
		family = unix.AF_INET6
	}

	entries, err := ct.ListEntries(family)
	if err != nil {
		if !errors.Is(err, unix.EINTR) {
			logger.Error(err, "Failed to list conntrack entries", "ipFamily", ipFamily)
			return
		}
		// An interrupted dump still returns what it read; cleaning that
		// much is better than nothing.
		logger.V(2).Info("Conntrack dump was interrupted, cleaning the partial result", "ipFamily", ipFamily, "err", err)
	}

	serviceIPs, nodePorts := servingEndpoints(svcPortMap, endpointsMap)
	stale := staleFlows(entries, serviceIPs, nodePorts)

	n, err := ct.DeleteEntries(family, stale)
	if err != nil {
		logger.Error(err, "Failed to clear all conntrack entries", "ipFamily", ipFamily, "entriesDeleted", n, "took", time.Since(start))
	} else {
		logger.V(4).Info("Finished reconciling conntrack entries", "ipFamily", ipFamily, "entriesDeleted", n, "took", time.Since(start))
	}
	metrics.ReconcileConntrackFlowsLatency.WithLabelValues(string(ipFamily)).Observe(metrics.SinceInSeconds(start))
	metrics.ReconcileConntrackFlowsDeletedEntriesTotal.WithLabelValues(string(ipFamily)).Add(float64(n))
}

// servingEndpoints maps every UDP service frontend, and every UDP node port
// that has endpoints, to the serving endpoints behind it.
func servingEndpoints(svcPortMap proxy.ServicePortMap, endpointsMap proxy.EndpointsMap) (map[addrPort]endpointSet, map[uint16]endpointSet) {
	serviceIPs := map[addrPort]endpointSet{}
	nodePorts := map[uint16]endpointSet{}
	for spn, svc := range svcPortMap {
		// Maps may be filled by third-party proxiers; a nil entry is
		// skipped rather than failing the whole cleanup.
		if svc == nil || svc.Protocol() != v1.ProtocolUDP {
			continue
		}
		eps := endpointSet{}
		for _, ep := range endpointsMap[spn] {
			// Serving, not just ready: a terminating endpoint still
			// answers its existing flows, and cutting them is worse than
			// letting them drain.
			if ep == nil || !ep.IsServing() {
				continue
			}
			if ap, ok := toAddrPort(net.ParseIP(ep.IP()), ep.Port()); ok {
				eps[ap] = struct{}{}
			}
		}

		port := svc.Port()
		frontends := make([]net.IP, 0, 1+len(svc.LoadBalancerVIPs())+len(svc.ExternalIPs()))
		frontends = append(frontends, svc.ClusterIP())
		frontends = append(frontends, svc.LoadBalancerVIPs()...)
		frontends = append(frontends, svc.ExternalIPs()...)
		for _, ip := range frontends {
			if ap, ok := toAddrPort(ip, port); ok {
				serviceIPs[ap] = eps
			}
		}
		if np := svc.NodePort(); np > 0 && np <= 65535 && len(eps) > 0 {
			nodePorts[uint16(np)] = eps
		}
	}
	return serviceIPs, nodePorts
}

// staleFlows returns the UDP entries whose original destination is a known
// frontend (or node port) but whose reply source is not one of its endpoints.
func staleFlows(entries []*netlink.ConntrackFlow, serviceIPs map[addrPort]endpointSet, nodePorts map[uint16]endpointSet) []*netlink.ConntrackFlow {
	var stale []*netlink.ConntrackFlow
	for _, entry := range entries {
		if entry == nil || entry.Forward.Protocol != unix.IPPROTO_UDP {
			continue
		}
		replySrc, ok := toAddrPort(entry.Reverse.SrcIP, int(entry.Reverse.SrcPort))
		if !ok {
			continue
		}
		if dst, ok := toAddrPort(entry.Forward.DstIP, int(entry.Forward.DstPort)); ok {
			if eps, known := serviceIPs[dst]; known {
				if _, serving := eps[replySrc]; !serving {
					stale = append(stale, entry)
				}
				continue
			}
		}
		if eps, known := nodePorts[entry.Forward.DstPort]; known {
			if _, serving := eps[replySrc]; !serving {
				stale = append(stale, entry)
			}
		}
	}
	return stale
}

func toAddrPort(ip net.IP, port int) (addrPort, bool) {
	addr, ok := netip.AddrFromSlice(ip)
	if !ok || port < 0 || port > 65535 {
		return addrPort{}, false
	}
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), true
}

// StaleEntriesCleaner returns CleanStaleEntries bound to ct and ipFamily, in
// the shape syncshell.Options.CleanStaleConntrack takes; nil when ct is nil.
func StaleEntriesCleaner(ct Interface, ipFamily v1.IPFamily) func(proxy.ServicePortMap, proxy.EndpointsMap) {
	if ct == nil {
		return nil
	}
	return func(svcPortMap proxy.ServicePortMap, endpointsMap proxy.EndpointsMap) {
		CleanStaleEntries(ct, ipFamily, svcPortMap, endpointsMap)
	}
}
