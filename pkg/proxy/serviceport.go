package proxy

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"k8s.io/kube-proxy/pkg/features"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// ServicePort is one port of one Service, reduced to what a proxier needs
// for one IP family. Third parties embed it in their own types.
type ServicePort interface {
	// String returns "clusterIP:port/protocol".
	String() string
	// ClusterIP returns the service's cluster IP of the tracker's family.
	ClusterIP() net.IP
	// Port returns the service port.
	Port() int
	// SessionAffinityType returns the session affinity.
	SessionAffinityType() v1.ServiceAffinity
	// StickyMaxAgeSeconds returns the ClientIP affinity timeout.
	StickyMaxAgeSeconds() int
	// ExternalIPs returns spec.externalIPs of the tracker's family; empty
	// when the AllowServiceExternalIPs gate is off.
	ExternalIPs() []net.IP
	// LoadBalancerVIPs returns the VIP-mode load-balancer ingress IPs of the
	// tracker's family.
	LoadBalancerVIPs() []net.IP
	// Protocol returns the port's protocol.
	Protocol() v1.Protocol
	// LoadBalancerSourceRanges returns the allowed source CIDRs of the
	// tracker's family; empty means "allow all".
	LoadBalancerSourceRanges() []*net.IPNet
	// HealthCheckNodePort returns the health check node port, or 0.
	HealthCheckNodePort() int
	// NodePort returns the node port, or 0.
	NodePort() int
	// ExternalPolicyLocal reports externalTrafficPolicy Local on an
	// externally accessible service.
	ExternalPolicyLocal() bool
	// InternalPolicyLocal reports internalTrafficPolicy Local.
	InternalPolicyLocal() bool
	// ExternallyAccessible reports whether the port has a node port, a
	// load-balancer VIP or an external IP.
	ExternallyAccessible() bool
	// UsesClusterEndpoints reports whether some traffic to the port uses
	// Cluster traffic policy.
	UsesClusterEndpoints() bool
	// UsesLocalEndpoints reports whether some traffic to the port uses Local
	// traffic policy.
	UsesLocalEndpoints() bool
}

// BaseServicePortInfo is the standard ServicePort. Proxiers that need more
// per-port data wrap it in their makeServiceInfo callback.
type BaseServicePortInfo struct {
	clusterIP                net.IP
	port                     int
	protocol                 v1.Protocol
	nodePort                 int
	loadBalancerVIPs         []net.IP
	sessionAffinityType      v1.ServiceAffinity
	stickyMaxAgeSeconds      int
	externalIPs              []net.IP
	loadBalancerSourceRanges []*net.IPNet
	healthCheckNodePort      int
	externalPolicyLocal      bool
	internalPolicyLocal      bool
}

var _ ServicePort = &BaseServicePortInfo{}

// String implements ServicePort.
func (info *BaseServicePortInfo) String() string {
	return fmt.Sprintf("%s:%d/%s", info.clusterIP, info.port, info.protocol)
}

// ClusterIP implements ServicePort.
func (info *BaseServicePortInfo) ClusterIP() net.IP { return info.clusterIP }

// Port implements ServicePort.
func (info *BaseServicePortInfo) Port() int { return info.port }

// SessionAffinityType implements ServicePort.
func (info *BaseServicePortInfo) SessionAffinityType() v1.ServiceAffinity {
	return info.sessionAffinityType
}

// StickyMaxAgeSeconds implements ServicePort.
func (info *BaseServicePortInfo) StickyMaxAgeSeconds() int { return info.stickyMaxAgeSeconds }

// Protocol implements ServicePort.
func (info *BaseServicePortInfo) Protocol() v1.Protocol { return info.protocol }

// LoadBalancerSourceRanges implements ServicePort.
func (info *BaseServicePortInfo) LoadBalancerSourceRanges() []*net.IPNet {
	return info.loadBalancerSourceRanges
}

// HealthCheckNodePort implements ServicePort.
func (info *BaseServicePortInfo) HealthCheckNodePort() int { return info.healthCheckNodePort }

// NodePort implements ServicePort.
func (info *BaseServicePortInfo) NodePort() int { return info.nodePort }

// ExternalIPs implements ServicePort. The gate is read at call time, as
// upstream does, so flipping it needs no re-conversion of services.
func (info *BaseServicePortInfo) ExternalIPs() []net.IP {
	if !features.DefaultFeatureGate.Enabled(features.AllowServiceExternalIPs) {
		return []net.IP{}
	}
	return info.externalIPs
}

// LoadBalancerVIPs implements ServicePort.
func (info *BaseServicePortInfo) LoadBalancerVIPs() []net.IP { return info.loadBalancerVIPs }

// ExternalPolicyLocal implements ServicePort.
func (info *BaseServicePortInfo) ExternalPolicyLocal() bool { return info.externalPolicyLocal }

// InternalPolicyLocal implements ServicePort.
func (info *BaseServicePortInfo) InternalPolicyLocal() bool { return info.internalPolicyLocal }

// ExternallyAccessible implements ServicePort.
func (info *BaseServicePortInfo) ExternallyAccessible() bool {
	return info.nodePort != 0 || len(info.loadBalancerVIPs) != 0 || len(info.externalIPs) != 0
}

// UsesClusterEndpoints implements ServicePort. Cluster endpoints are used
// unless internal traffic is Local, and always for external traffic, which
// falls back to them when not Local.
func (info *BaseServicePortInfo) UsesClusterEndpoints() bool {
	return !info.internalPolicyLocal || info.ExternallyAccessible()
}

// UsesLocalEndpoints implements ServicePort.
func (info *BaseServicePortInfo) UsesLocalEndpoints() bool {
	return info.internalPolicyLocal || (info.externalPolicyLocal && info.ExternallyAccessible())
}

// serviceExternallyAccessible reports whether traffic from outside the
// cluster can reach service (node ports, load balancers or external IPs).
func serviceExternallyAccessible(service *v1.Service) bool {
	switch service.Spec.Type {
	case v1.ServiceTypeLoadBalancer, v1.ServiceTypeNodePort:
		return true
	case v1.ServiceTypeClusterIP:
		return len(service.Spec.ExternalIPs) > 0
	}
	return false
}

// serviceExternalPolicyLocal reports externalTrafficPolicy=Local on a service
// that can receive external traffic at all.
func serviceExternalPolicyLocal(service *v1.Service) bool {
	return serviceExternallyAccessible(service) &&
		service.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
}

// serviceInternalPolicyLocal reports internalTrafficPolicy=Local.
func serviceInternalPolicyLocal(service *v1.Service) bool {
	p := service.Spec.InternalTrafficPolicy
	return p != nil && *p == v1.ServiceInternalTrafficPolicyLocal
}

// serviceNeedsHealthCheck reports whether the service gets a health check
// node port: only Local-policy load balancers do.
func serviceNeedsHealthCheck(service *v1.Service) bool {
	return service.Spec.Type == v1.ServiceTypeLoadBalancer && serviceExternalPolicyLocal(service)
}

// validProtocol reports whether kube-proxy can program p.
func validProtocol(p v1.Protocol) bool {
	return p == v1.ProtocolTCP || p == v1.ProtocolUDP || p == v1.ProtocolSCTP
}

// maxClientIPAffinitySeconds is the API server's upper bound for
// sessionAffinityConfig.clientIP.timeoutSeconds (one day).
const maxClientIPAffinitySeconds = 86400

// newBaseServiceInfo converts one port of service for ipFamily. clusterIP is
// the already-parsed cluster IP of that family; portIndex is port's index in
// spec.ports, for logs.
func newBaseServiceInfo(logger klog.Logger, service *v1.Service, ipFamily v1.IPFamily, clusterIP net.IP, port *v1.ServicePort, portIndex int) *BaseServicePortInfo {
	info := &BaseServicePortInfo{
		clusterIP:           clusterIP,
		port:                int(port.Port),
		protocol:            port.Protocol,
		sessionAffinityType: service.Spec.SessionAffinity,
		externalPolicyLocal: serviceExternalPolicyLocal(service),
		internalPolicyLocal: serviceInternalPolicyLocal(service),
	}

	// The API server guarantees a valid node port; objects from other
	// sources (manifests, tests) do not, and one out-of-range port would
	// make a whole rule transaction fail. The cluster IP still works
	// without it, so only the node port is dropped.
	if np := port.NodePort; np < 0 || np > 65535 {
		logger.Error(nil, "Ignoring invalid node port of service port", "service", klog.KObj(service),
			"field", servicePortField(portIndex)+".nodePort", "value", np)
	} else {
		info.nodePort = int(np)
	}

	if service.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		// The API server always defaults the timeout (and keeps it within
		// 1..MaxClientIPServiceAffinitySeconds); objects from other sources
		// may not, so default here too instead of dereferencing nil or
		// programming a timeout the kernel rejects.
		cfg := service.Spec.SessionAffinityConfig
		switch {
		case cfg == nil || cfg.ClientIP == nil || cfg.ClientIP.TimeoutSeconds == nil:
			logger.Info("Service has ClientIP session affinity without a timeout, using the default",
				"service", klog.KObj(service), "field", "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
				"default", v1.DefaultClientIPServiceAffinitySeconds)
			info.stickyMaxAgeSeconds = int(v1.DefaultClientIPServiceAffinitySeconds)
		case *cfg.ClientIP.TimeoutSeconds <= 0 || *cfg.ClientIP.TimeoutSeconds > maxClientIPAffinitySeconds:
			logger.Error(nil, "Service has an invalid ClientIP session affinity timeout, using the default",
				"service", klog.KObj(service), "field", "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
				"value", *cfg.ClientIP.TimeoutSeconds, "default", v1.DefaultClientIPServiceAffinitySeconds)
			info.stickyMaxAgeSeconds = int(v1.DefaultClientIPServiceAffinitySeconds)
		default:
			info.stickyMaxAgeSeconds = int(*cfg.ClientIP.TimeoutSeconds)
		}
	}

	// Most services have neither; skipping the family split saves several
	// allocations per port on the conversion hot path.
	if len(service.Spec.ExternalIPs) > 0 {
		info.externalIPs = proxyutil.MapIPsByIPFamily(service.Spec.ExternalIPs)[ipFamily]
	}
	if len(service.Spec.LoadBalancerSourceRanges) > 0 {
		ranges := make([]string, len(service.Spec.LoadBalancerSourceRanges))
		for i, r := range service.Spec.LoadBalancerSourceRanges {
			ranges[i] = strings.TrimSpace(r)
		}
		cidrs := proxyutil.MapCIDRsByIPFamily(ranges)[ipFamily]
		// A zero CIDR allows everything, which is what no ranges means too;
		// normalising lets proxiers skip the firewall entirely.
		if slices.ContainsFunc(cidrs, proxyutil.IsZeroCIDR) {
			cidrs = []*net.IPNet{}
		}
		info.loadBalancerSourceRanges = cidrs
	}

	for i, ing := range service.Status.LoadBalancer.Ingress {
		if ing.IP == "" || !proxyutil.IsVIPMode(ing) {
			continue
		}
		ip := netutils.ParseIPSloppy(ing.IP)
		if ip == nil {
			logger.Info("Ignoring invalid load balancer ingress IP", "service", klog.KObj(service),
				"field", "status.loadBalancer.ingress["+strconv.Itoa(i)+"].ip", "value", ing.IP)
			continue
		}
		if proxyutil.GetIPFamilyFromIP(ip) == ipFamily {
			info.loadBalancerVIPs = append(info.loadBalancerVIPs, ip)
		}
	}

	if serviceNeedsHealthCheck(service) {
		p := service.Spec.HealthCheckNodePort
		if p <= 0 || p > 65535 {
			logger.Error(nil, "Service has no valid healthcheck nodeport", "service", klog.KObj(service),
				"field", "spec.healthCheckNodePort", "value", p)
		} else {
			info.healthCheckNodePort = int(p)
		}
	}
	return info
}

// servicePortField names spec.ports[i] in logs. Built only when logging: it
// would otherwise cost an allocation per port on the conversion hot path.
func servicePortField(i int) string {
	return "spec.ports[" + strconv.Itoa(i) + "]"
}
