package app

import (
	"context"
	"net"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// setDryRunNodeAddresses decides which addresses a dry run computes
// NodePorts (and, in ipvs mode, the node's own virtual servers) for. A
// live proxier reads them from the host's interfaces every sync. A dry run
// from manifests (or --localnode-source, which must print the same), or
// the computed rules of `kube-proxy trace`, usually runs
// on a machine that is not the node it computes for (an operator's laptop,
// CI), whose interfaces hold none of the node's addresses: the NodePort
// rules then matched nothing (an empty nodeport-ips set) and a NodePort
// packet went undnatted. So those runs use the addresses the node has:
// local when given (trace's --local-addresses), else the Node's InternalIP
// and ExternalIP addresses, plus the node IPs chosen from --bind-address or
// nodeIPOverride, plus loopback, which every host has.
func (s *ProxyServer) setDryRunNodeAddresses(ctx context.Context, local []net.IP) {
	var ips []net.IP
	seen := map[string]bool{}
	add := func(ip net.IP) {
		if ip == nil || ip.IsUnspecified() || seen[ip.String()] {
			return
		}
		seen[ip.String()] = true
		ips = append(ips, ip)
	}
	if len(local) > 0 {
		for _, ip := range local {
			add(ip)
		}
	} else {
		if s.NodeManager != nil {
			if node := s.NodeManager.Node(); node != nil {
				for _, a := range node.Status.Addresses {
					if a.Type == v1.NodeInternalIP || a.Type == v1.NodeExternalIP {
						add(netutils.ParseIPSloppy(a.Address))
					}
				}
			}
		}
		for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			add(s.NodeIPs[family])
		}
		add(net.IPv4(127, 0, 0, 1))
		add(net.IPv6loopback)
	}
	klog.FromContext(ctx).Info("Dry run computes the rules for the node's addresses, not this host's interfaces", "node", s.NodeName, "addresses", ips)
	s.nodeAddrs = proxyutil.StaticNetwork{IPs: ips}
}

// nodeAddresses lists what setDryRunNodeAddresses chose; nil when the
// proxiers read the host's interfaces.
func (s *ProxyServer) nodeAddresses() []net.IP {
	if n, ok := s.nodeAddrs.(proxyutil.StaticNetwork); ok {
		return n.IPs
	}
	return nil
}

func ipsOf(addrs []netip.Addr) []net.IP {
	var ips []net.IP
	for _, a := range addrs {
		ips = append(ips, net.IP(a.Unmap().AsSlice()))
	}
	return ips
}
