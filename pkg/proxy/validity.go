package proxy

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// ServicePortProblem says why no backend can program svc in an IP family of
// family, or "" when it can. The service tracker only builds ports that
// pass, but backends also take ServicePort implementations of their
// embedders (as Calico has) through syncshell.NewUpdate, so every backend's
// Validator asks this and adds only what is specific to it.
func ServicePortProblem(family v1.IPFamily, svc ServicePort) string {
	ip := svc.ClusterIP()
	switch {
	case ip == nil || ip.IsUnspecified():
		return "missing or unspecified cluster IP"
	case (ip.To4() != nil) != (family == v1.IPv4Protocol):
		return fmt.Sprintf("cluster IP %s is not %s", ip, family)
	case svc.Port() <= 0 || svc.Port() > 65535:
		return fmt.Sprintf("port %d out of range", svc.Port())
	case svc.NodePort() < 0 || svc.NodePort() > 65535:
		return fmt.Sprintf("nodePort %d out of range", svc.NodePort())
	case svc.HealthCheckNodePort() < 0 || svc.HealthCheckNodePort() > 65535:
		return fmt.Sprintf("healthCheckNodePort %d out of range", svc.HealthCheckNodePort())
	}
	switch svc.Protocol() {
	case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		return ""
	}
	return fmt.Sprintf("unsupported protocol %q", svc.Protocol())
}

// EndpointProblem says why ep cannot be programmed in an IP family of
// family, or "" when it can. The endpoints tracker's own endpoints
// (*BaseEndpointInfo) were checked when it made them and pass without being
// parsed again, which a full sync of 100k endpoints would notice.
func EndpointProblem(family v1.IPFamily, ep Endpoint) string {
	if _, ok := ep.(*BaseEndpointInfo); ok {
		return ""
	}
	addr, err := netip.ParseAddr(ep.IP())
	switch {
	case err != nil:
		return fmt.Sprintf("invalid IP %q", ep.IP())
	case addr.Unmap().Is4() != (family == v1.IPv4Protocol):
		return fmt.Sprintf("IP %s is not %s", ep.IP(), family)
	case ep.Port() <= 0 || ep.Port() > 65535:
		return fmt.Sprintf("port %d out of range", ep.Port())
	}
	return ""
}
