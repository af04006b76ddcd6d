package localnodev1

import (
	"fmt"
	"net/netip"
	"time"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// maxPort bounds every port field: the wire type is uint32, a port is 16 bits.
const maxPort = 65535

// maxAffinitySeconds bounds the session affinity timeout (one day, the API server's
// limit), so a decoded value always fits a time.Duration.
const maxAffinitySeconds = 86400

// FamilyFromLocal returns the wire family of f; FAMILY_UNSPECIFIED for an unknown one.
func FamilyFromLocal(f localnode.Family) Family {
	switch f {
	case localnode.IPv4:
		return Family_IPV4
	case localnode.IPv6:
		return Family_IPV6
	}
	return Family_FAMILY_UNSPECIFIED
}

// FamilyToLocal returns the model's family of f, or an error for an unknown one.
func FamilyToLocal(f Family) (localnode.Family, error) {
	switch f {
	case Family_IPV4:
		return localnode.IPv4, nil
	case Family_IPV6:
		return localnode.IPv6, nil
	}
	return "", fmt.Errorf("unknown IP family %v", f)
}

func protocolFromLocal(p localnode.Protocol) Protocol {
	switch p {
	case localnode.TCP:
		return Protocol_TCP
	case localnode.UDP:
		return Protocol_UDP
	case localnode.SCTP:
		return Protocol_SCTP
	}
	return Protocol_PROTOCOL_UNSPECIFIED
}

func protocolToLocal(p Protocol) (localnode.Protocol, error) {
	switch p {
	case Protocol_TCP:
		return localnode.TCP, nil
	case Protocol_UDP:
		return localnode.UDP, nil
	case Protocol_SCTP:
		return localnode.SCTP, nil
	}
	return "", fmt.Errorf("unknown protocol %v", p)
}

func affinityFromLocal(a localnode.Affinity) Affinity {
	if a == localnode.AffinityClientIP {
		return Affinity_AFFINITY_CLIENT_IP
	}
	return Affinity_AFFINITY_NONE
}

func affinityToLocal(a Affinity) (localnode.Affinity, error) {
	switch a {
	case Affinity_AFFINITY_UNSPECIFIED, Affinity_AFFINITY_NONE:
		return localnode.AffinityNone, nil
	case Affinity_AFFINITY_CLIENT_IP:
		return localnode.AffinityClientIP, nil
	}
	return "", fmt.Errorf("unknown session affinity %v", a)
}

func policyFromLocal(p localnode.Policy) Policy {
	if p == localnode.PolicyLocal {
		return Policy_POLICY_LOCAL
	}
	return Policy_POLICY_CLUSTER
}

func policyToLocal(p Policy) (localnode.Policy, error) {
	switch p {
	case Policy_POLICY_UNSPECIFIED, Policy_POLICY_CLUSTER:
		return localnode.PolicyCluster, nil
	case Policy_POLICY_LOCAL:
		return localnode.PolicyLocal, nil
	}
	return "", fmt.Errorf("unknown traffic policy %v", p)
}

// PortNameFromLocal converts a port name.
func PortNameFromLocal(n localnode.PortName) *PortName {
	return &PortName{Namespace: n.Namespace, Name: n.Name, Port: n.Port, Protocol: protocolFromLocal(n.Protocol)}
}

// PortNameToLocal converts a port name; namespace, name and protocol are required.
func PortNameToLocal(n *PortName) (localnode.PortName, error) {
	if n == nil {
		return localnode.PortName{}, fmt.Errorf("name: missing")
	}
	if n.GetNamespace() == "" || n.GetName() == "" {
		return localnode.PortName{}, fmt.Errorf("name: namespace %q and name %q must both be set", n.GetNamespace(), n.GetName())
	}
	proto, err := protocolToLocal(n.GetProtocol())
	if err != nil {
		return localnode.PortName{}, fmt.Errorf("name.protocol: %w", err)
	}
	return localnode.PortName{Namespace: n.GetNamespace(), Name: n.GetName(), Port: n.GetPort(), Protocol: proto}, nil
}

// ServiceKeyFromLocal returns the key of a node-local service.
func ServiceKeyFromLocal(f localnode.Family, n localnode.PortName) *ServiceKey {
	return &ServiceKey{Family: FamilyFromLocal(f), Name: PortNameFromLocal(n)}
}

// ServiceKeyToLocal converts a key.
func ServiceKeyToLocal(k *ServiceKey) (localnode.Family, localnode.PortName, error) {
	f, err := FamilyToLocal(k.GetFamily())
	if err != nil {
		return "", localnode.PortName{}, fmt.Errorf("family: %w", err)
	}
	n, err := PortNameToLocal(k.GetName())
	if err != nil {
		return "", localnode.PortName{}, err
	}
	return f, n, nil
}

// ServiceFromLocal converts one node-local service of family f.
func ServiceFromLocal(f localnode.Family, s *localnode.Service) *Service {
	p := &s.ServicePort
	out := &Service{
		Family:                 FamilyFromLocal(f),
		Name:                   PortNameFromLocal(p.Name),
		ClusterIp:              addrString(p.ClusterIP),
		Port:                   uint32(p.Port),
		NodePort:               uint32(p.NodePort),
		ExternalIps:            addrStrings(p.ExternalIPs),
		LoadBalancerVips:       addrStrings(p.LoadBalancerVIPs),
		SessionAffinity:        affinityFromLocal(p.SessionAffinity),
		AffinityTimeoutSeconds: uint32(p.AffinityTimeout / time.Second),
		InternalPolicy:         policyFromLocal(p.InternalPolicy),
		ExternalPolicy:         policyFromLocal(p.ExternalPolicy),
		HealthCheckNodePort:    uint32(p.HealthCheckNodePort),
		HasAnyEndpoints:        s.HasAnyEndpoints,
	}
	if len(p.SourceRanges) > 0 {
		out.SourceRanges = make([]string, len(p.SourceRanges))
		for i, r := range p.SourceRanges {
			out.SourceRanges[i] = r.String()
		}
	}
	if len(s.Endpoints) > 0 {
		out.Endpoints = make([]*Endpoint, len(s.Endpoints))
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			out.Endpoints[i] = &Endpoint{
				Ip: addrString(e.IP), Port: uint32(e.Port),
				Ready: e.Ready, Serving: e.Serving, Terminating: e.Terminating,
				NodeName: e.NodeName, Zone: e.Zone,
				Local: e.Local, ForCluster: e.ForCluster, ForLocal: e.ForLocal,
			}
		}
	}
	return out
}

// ServiceToLocal decodes a node-local service: its family and the model's value,
// normalized. Every address must be valid and of the service's family, every port in
// range; the error names the first field that is not.
func ServiceToLocal(s *Service) (localnode.Family, localnode.Service, error) {
	var out localnode.Service
	if s == nil {
		return "", out, fmt.Errorf("service: missing")
	}
	f, err := FamilyToLocal(s.GetFamily())
	if err != nil {
		return "", out, fmt.Errorf("service: family: %w", err)
	}
	name, err := PortNameToLocal(s.GetName())
	if err != nil {
		return "", out, fmt.Errorf("service: %w", err)
	}
	wrap := func(field string, err error) error {
		return fmt.Errorf("service %s: %s: %w", name, field, err)
	}
	p := &out.ServicePort
	p.Name = name
	if p.ClusterIP, err = parseAddr(s.GetClusterIp(), f); err != nil {
		return "", out, wrap("cluster_ip", err)
	}
	if p.Port, err = port(s.GetPort(), false); err != nil {
		return "", out, wrap("port", err)
	}
	if p.NodePort, err = port(s.GetNodePort(), true); err != nil {
		return "", out, wrap("node_port", err)
	}
	if p.HealthCheckNodePort, err = port(s.GetHealthCheckNodePort(), true); err != nil {
		return "", out, wrap("health_check_node_port", err)
	}
	if p.ExternalIPs, err = parseAddrs(s.GetExternalIps(), f); err != nil {
		return "", out, wrap("external_ips", err)
	}
	if p.LoadBalancerVIPs, err = parseAddrs(s.GetLoadBalancerVips(), f); err != nil {
		return "", out, wrap("load_balancer_vips", err)
	}
	for i, r := range s.GetSourceRanges() {
		pfx, err := netip.ParsePrefix(r)
		if err != nil {
			return "", out, wrap(fmt.Sprintf("source_ranges[%d]", i), err)
		}
		if !pfx.Addr().Is4() != (f == localnode.IPv6) || pfx.Addr().Is4In6() {
			return "", out, wrap(fmt.Sprintf("source_ranges[%d]", i), fmt.Errorf("%q is not an %s prefix", r, f))
		}
		p.SourceRanges = append(p.SourceRanges, pfx)
	}
	if p.SessionAffinity, err = affinityToLocal(s.GetSessionAffinity()); err != nil {
		return "", out, wrap("session_affinity", err)
	}
	if t := s.GetAffinityTimeoutSeconds(); t > maxAffinitySeconds {
		return "", out, wrap("affinity_timeout_seconds", fmt.Errorf("%d is more than %d", t, maxAffinitySeconds))
	} else if p.SessionAffinity == localnode.AffinityClientIP {
		p.AffinityTimeout = time.Duration(t) * time.Second
	}
	if p.InternalPolicy, err = policyToLocal(s.GetInternalPolicy()); err != nil {
		return "", out, wrap("internal_policy", err)
	}
	if p.ExternalPolicy, err = policyToLocal(s.GetExternalPolicy()); err != nil {
		return "", out, wrap("external_policy", err)
	}
	out.HasAnyEndpoints = s.GetHasAnyEndpoints()
	if eps := s.GetEndpoints(); len(eps) > 0 {
		out.Endpoints = make([]localnode.Endpoint, len(eps))
		for i, e := range eps {
			field := fmt.Sprintf("endpoints[%d]", i)
			if e == nil {
				return "", out, wrap(field, fmt.Errorf("missing"))
			}
			ep := &out.Endpoints[i]
			if ep.IP, err = parseAddr(e.GetIp(), f); err != nil {
				return "", out, wrap(field+".ip", err)
			}
			if ep.Port, err = port(e.GetPort(), false); err != nil {
				return "", out, wrap(field+".port", err)
			}
			ep.Ready, ep.Serving, ep.Terminating = e.GetReady(), e.GetServing(), e.GetTerminating()
			ep.NodeName, ep.Zone = e.GetNodeName(), e.GetZone()
			ep.Local, ep.ForCluster, ep.ForLocal = e.GetLocal(), e.GetForCluster(), e.GetForLocal()
		}
	}
	out.Normalize()
	return f, out, nil
}

// StateFromLocal converts a whole State into one message per service.
func StateFromLocal(st *localnode.State) []*Service {
	out := make([]*Service, len(st.Services))
	for i := range st.Services {
		out[i] = ServiceFromLocal(st.Family, &st.Services[i])
	}
	return out
}

// StateToLocal decodes services of family f into a canonical State. Every service must
// be of f; of two with the same name the later wins, as in State.Normalize.
func StateToLocal(f localnode.Family, services []*Service) (*localnode.State, error) {
	st := &localnode.State{Family: f, Services: make([]localnode.Service, 0, len(services))}
	for i, s := range services {
		sf, svc, err := ServiceToLocal(s)
		if err != nil {
			return nil, fmt.Errorf("services[%d]: %w", i, err)
		}
		if sf != f {
			return nil, fmt.Errorf("services[%d]: service %s: family %s in a %s state", i, svc.Name, sf, f)
		}
		st.Services = append(st.Services, svc)
	}
	st.Normalize()
	return st, nil
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

func addrStrings(as []netip.Addr) []string {
	if len(as) == 0 {
		return nil
	}
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = addrString(a)
	}
	return out
}

// parseAddr parses an address that must be of family f (no IPv4-mapped IPv6, no zone).
func parseAddr(s string, f localnode.Family) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if a.Is4() != (f == localnode.IPv4) || a.Is4In6() || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q is not an %s address", s, f)
	}
	return a, nil
}

func parseAddrs(ss []string, f localnode.Family) ([]netip.Addr, error) {
	if len(ss) == 0 {
		return nil, nil
	}
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		a, err := parseAddr(s, f)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out[i] = a
	}
	return out, nil
}

// port checks a port number; zero is allowed only where it means "none".
func port(p uint32, zeroOK bool) (uint16, error) {
	if p > maxPort {
		return 0, fmt.Errorf("%d is not a port number", p)
	}
	if p == 0 && !zeroOK {
		return 0, fmt.Errorf("missing (0)")
	}
	return uint16(p), nil
}
