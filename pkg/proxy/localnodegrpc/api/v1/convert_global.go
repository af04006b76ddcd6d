package localnodev1

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The global view carries Kubernetes objects reduced to what a service proxy reads. The
// *ToAPI decoders rebuild objects the brain accepts; values the API server would have
// refused (a port out of range, an unknown enum) are errors here, naming the field,
// while addresses stay strings, exactly as in the API, for the brain to judge.

func protocolFromAPI(p v1.Protocol) Protocol {
	switch p {
	case v1.ProtocolTCP, "":
		return Protocol_TCP
	case v1.ProtocolUDP:
		return Protocol_UDP
	case v1.ProtocolSCTP:
		return Protocol_SCTP
	}
	return Protocol_PROTOCOL_UNSPECIFIED
}

func protocolToAPI(p Protocol) (v1.Protocol, error) {
	switch p {
	case Protocol_TCP:
		return v1.ProtocolTCP, nil
	case Protocol_UDP:
		return v1.ProtocolUDP, nil
	case Protocol_SCTP:
		return v1.ProtocolSCTP, nil
	}
	return "", fmt.Errorf("unknown protocol %v", p)
}

func familyFromAPI(f v1.IPFamily) Family {
	switch f {
	case v1.IPv4Protocol:
		return Family_IPV4
	case v1.IPv6Protocol:
		return Family_IPV6
	}
	return Family_FAMILY_UNSPECIFIED
}

func familyToAPI(f Family) (v1.IPFamily, error) {
	switch f {
	case Family_IPV4:
		return v1.IPv4Protocol, nil
	case Family_IPV6:
		return v1.IPv6Protocol, nil
	}
	return "", fmt.Errorf("unknown IP family %v", f)
}

// GlobalServiceFromAPI converts a Service of the cluster.
func GlobalServiceFromAPI(svc *v1.Service) *GlobalService {
	out := &GlobalService{
		Namespace:                svc.Namespace,
		Name:                     svc.Name,
		Type:                     string(svc.Spec.Type),
		ClusterIps:               svc.Spec.ClusterIPs,
		ExternalIps:              svc.Spec.ExternalIPs,
		LoadBalancerSourceRanges: svc.Spec.LoadBalancerSourceRanges,
		HealthCheckNodePort:      uint32(max(0, svc.Spec.HealthCheckNodePort)),
		Labels:                   svc.Labels,
		ResourceVersion:          svc.ResourceVersion,
	}
	if len(out.ClusterIps) == 0 && svc.Spec.ClusterIP != "" {
		out.ClusterIps = []string{svc.Spec.ClusterIP}
	}
	for _, f := range svc.Spec.IPFamilies {
		out.IpFamilies = append(out.IpFamilies, familyFromAPI(f))
	}
	for _, p := range svc.Spec.Ports {
		out.Ports = append(out.Ports, &GlobalServicePort{
			Name: p.Name, Protocol: protocolFromAPI(p.Protocol),
			Port: uint32(max(0, p.Port)), NodePort: uint32(max(0, p.NodePort)),
		})
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP == "" {
			continue
		}
		lb := &LoadBalancerIngress{Ip: ing.IP}
		if ing.IPMode != nil {
			lb.IpMode = string(*ing.IPMode)
		}
		out.LoadBalancerIngress = append(out.LoadBalancerIngress, lb)
	}
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		out.SessionAffinity = Affinity_AFFINITY_CLIENT_IP
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			out.AffinityTimeoutSeconds = uint32(max(0, *c.ClientIP.TimeoutSeconds))
		}
	} else {
		out.SessionAffinity = Affinity_AFFINITY_NONE
	}
	if p := svc.Spec.InternalTrafficPolicy; p != nil {
		out.InternalPolicy = Policy_POLICY_CLUSTER
		if *p == v1.ServiceInternalTrafficPolicyLocal {
			out.InternalPolicy = Policy_POLICY_LOCAL
		}
	}
	switch svc.Spec.ExternalTrafficPolicy {
	case v1.ServiceExternalTrafficPolicyLocal:
		out.ExternalPolicy = Policy_POLICY_LOCAL
	case v1.ServiceExternalTrafficPolicyCluster:
		out.ExternalPolicy = Policy_POLICY_CLUSTER
	}
	return out
}

// GlobalServiceToAPI rebuilds a Service the brain reads like the original.
func GlobalServiceToAPI(g *GlobalService) (*v1.Service, error) {
	if g == nil {
		return nil, fmt.Errorf("global service: missing")
	}
	if g.GetNamespace() == "" || g.GetName() == "" {
		return nil, fmt.Errorf("global service: namespace %q and name %q must both be set", g.GetNamespace(), g.GetName())
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: g.GetNamespace(), Name: g.GetName(),
			Labels: maps.Clone(g.GetLabels()), ResourceVersion: g.GetResourceVersion(),
		},
		Spec: v1.ServiceSpec{
			Type:                     v1.ServiceType(g.GetType()),
			ClusterIPs:               g.GetClusterIps(),
			ExternalIPs:              g.GetExternalIps(),
			LoadBalancerSourceRanges: g.GetLoadBalancerSourceRanges(),
		},
	}
	wrap := func(field string, err error) error {
		return fmt.Errorf("global service %s/%s: %s: %w", g.GetNamespace(), g.GetName(), field, err)
	}
	switch svc.Spec.Type {
	case v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer, v1.ServiceTypeExternalName:
	case "":
		svc.Spec.Type = v1.ServiceTypeClusterIP
	default:
		return nil, wrap("type", fmt.Errorf("unknown service type %q", g.GetType()))
	}
	if len(svc.Spec.ClusterIPs) > 0 {
		svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	}
	for i, f := range g.GetIpFamilies() {
		af, err := familyToAPI(f)
		if err != nil {
			return nil, wrap(fmt.Sprintf("ip_families[%d]", i), err)
		}
		svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, af)
	}
	for i, p := range g.GetPorts() {
		field := fmt.Sprintf("ports[%d]", i)
		if p == nil {
			return nil, wrap(field, fmt.Errorf("missing"))
		}
		proto, err := protocolToAPI(p.GetProtocol())
		if err != nil {
			return nil, wrap(field+".protocol", err)
		}
		pn, err := port(p.GetPort(), false)
		if err != nil {
			return nil, wrap(field+".port", err)
		}
		np, err := port(p.GetNodePort(), true)
		if err != nil {
			return nil, wrap(field+".node_port", err)
		}
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: p.GetName(), Protocol: proto, Port: int32(pn), NodePort: int32(np)})
	}
	for i, ing := range g.GetLoadBalancerIngress() {
		if ing == nil {
			return nil, wrap(fmt.Sprintf("load_balancer_ingress[%d]", i), fmt.Errorf("missing"))
		}
		lb := v1.LoadBalancerIngress{IP: ing.GetIp()}
		if m := ing.GetIpMode(); m != "" {
			mode := v1.LoadBalancerIPMode(m)
			lb.IPMode = &mode
		}
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, lb)
	}
	switch g.GetSessionAffinity() {
	case Affinity_AFFINITY_UNSPECIFIED, Affinity_AFFINITY_NONE:
		svc.Spec.SessionAffinity = v1.ServiceAffinityNone
	case Affinity_AFFINITY_CLIENT_IP:
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		if t := g.GetAffinityTimeoutSeconds(); t != 0 {
			if t > maxAffinitySeconds {
				return nil, wrap("affinity_timeout_seconds", fmt.Errorf("%d is more than %d", t, maxAffinitySeconds))
			}
			ts := int32(t)
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &ts}}
		}
	default:
		return nil, wrap("session_affinity", fmt.Errorf("unknown session affinity %v", g.GetSessionAffinity()))
	}
	switch g.GetInternalPolicy() {
	case Policy_POLICY_UNSPECIFIED:
	case Policy_POLICY_CLUSTER:
		p := v1.ServiceInternalTrafficPolicyCluster
		svc.Spec.InternalTrafficPolicy = &p
	case Policy_POLICY_LOCAL:
		p := v1.ServiceInternalTrafficPolicyLocal
		svc.Spec.InternalTrafficPolicy = &p
	default:
		return nil, wrap("internal_policy", fmt.Errorf("unknown traffic policy %v", g.GetInternalPolicy()))
	}
	switch g.GetExternalPolicy() {
	case Policy_POLICY_UNSPECIFIED:
	case Policy_POLICY_CLUSTER:
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	case Policy_POLICY_LOCAL:
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	default:
		return nil, wrap("external_policy", fmt.Errorf("unknown traffic policy %v", g.GetExternalPolicy()))
	}
	hc, err := port(g.GetHealthCheckNodePort(), true)
	if err != nil {
		return nil, wrap("health_check_node_port", err)
	}
	svc.Spec.HealthCheckNodePort = int32(hc)
	return svc, nil
}

func conditionFromAPI(b *bool) Condition {
	switch {
	case b == nil:
		return Condition_CONDITION_UNSET
	case *b:
		return Condition_CONDITION_TRUE
	}
	return Condition_CONDITION_FALSE
}

func conditionToAPI(c Condition) (*bool, error) {
	switch c {
	case Condition_CONDITION_UNSET:
		return nil, nil
	case Condition_CONDITION_TRUE:
		t := true
		return &t, nil
	case Condition_CONDITION_FALSE:
		f := false
		return &f, nil
	}
	return nil, fmt.Errorf("unknown condition %v", c)
}

func strOrEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// EndpointSliceFromAPI converts an EndpointSlice of the cluster.
func EndpointSliceFromAPI(s *discovery.EndpointSlice) *EndpointSlice {
	out := &EndpointSlice{
		Namespace: s.Namespace, Name: s.Name,
		Service:         s.Labels[discovery.LabelServiceName],
		Labels:          s.Labels,
		ResourceVersion: s.ResourceVersion,
	}
	switch s.AddressType {
	case discovery.AddressTypeIPv4:
		out.AddressType = Family_IPV4
	case discovery.AddressTypeIPv6:
		out.AddressType = Family_IPV6
	}
	for _, p := range s.Ports {
		ep := &EndpointPort{Name: strOrEmpty(p.Name), HasName: p.Name != nil, Protocol: Protocol_TCP}
		if p.Protocol != nil {
			ep.Protocol = protocolFromAPI(*p.Protocol)
		}
		if p.Port != nil {
			ep.Port, ep.HasPort = uint32(max(0, *p.Port)), true
		}
		out.Ports = append(out.Ports, ep)
	}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		ge := &GlobalEndpoint{
			Addresses:   e.Addresses,
			Ready:       conditionFromAPI(e.Conditions.Ready),
			Serving:     conditionFromAPI(e.Conditions.Serving),
			Terminating: conditionFromAPI(e.Conditions.Terminating),
			NodeName:    strOrEmpty(e.NodeName),
			Zone:        strOrEmpty(e.Zone),
		}
		if e.Hints != nil {
			for _, z := range e.Hints.ForZones {
				ge.HintZones = append(ge.HintZones, z.Name)
			}
			for _, n := range e.Hints.ForNodes {
				ge.HintNodes = append(ge.HintNodes, n.Name)
			}
		}
		out.Endpoints = append(out.Endpoints, ge)
	}
	return out
}

// EndpointSliceToAPI rebuilds an EndpointSlice the brain reads like the original.
func EndpointSliceToAPI(g *EndpointSlice) (*discovery.EndpointSlice, error) {
	if g == nil {
		return nil, fmt.Errorf("endpoint slice: missing")
	}
	if g.GetNamespace() == "" || g.GetName() == "" {
		return nil, fmt.Errorf("endpoint slice: namespace %q and name %q must both be set", g.GetNamespace(), g.GetName())
	}
	wrap := func(field string, err error) error {
		return fmt.Errorf("endpoint slice %s/%s: %s: %w", g.GetNamespace(), g.GetName(), field, err)
	}
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: g.GetNamespace(), Name: g.GetName(),
			Labels: maps.Clone(g.GetLabels()), ResourceVersion: g.GetResourceVersion(),
		},
	}
	if g.GetService() != "" {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[discovery.LabelServiceName] = g.GetService()
	}
	switch g.GetAddressType() {
	case Family_IPV4:
		s.AddressType = discovery.AddressTypeIPv4
	case Family_IPV6:
		s.AddressType = discovery.AddressTypeIPv6
	default:
		return nil, wrap("address_type", fmt.Errorf("unknown IP family %v", g.GetAddressType()))
	}
	for i, p := range g.GetPorts() {
		field := fmt.Sprintf("ports[%d]", i)
		if p == nil {
			return nil, wrap(field, fmt.Errorf("missing"))
		}
		proto, err := protocolToAPI(p.GetProtocol())
		if err != nil {
			return nil, wrap(field+".protocol", err)
		}
		ep := discovery.EndpointPort{Protocol: &proto}
		if p.GetHasName() {
			name := p.GetName()
			ep.Name = &name
		}
		if p.GetHasPort() {
			pn, err := port(p.GetPort(), true)
			if err != nil {
				return nil, wrap(field+".port", err)
			}
			n := int32(pn)
			ep.Port = &n
		}
		s.Ports = append(s.Ports, ep)
	}
	for i, e := range g.GetEndpoints() {
		field := fmt.Sprintf("endpoints[%d]", i)
		if e == nil {
			return nil, wrap(field, fmt.Errorf("missing"))
		}
		ep := discovery.Endpoint{Addresses: e.GetAddresses(), NodeName: strPtr(e.GetNodeName()), Zone: strPtr(e.GetZone())}
		var err error
		if ep.Conditions.Ready, err = conditionToAPI(e.GetReady()); err != nil {
			return nil, wrap(field+".ready", err)
		}
		if ep.Conditions.Serving, err = conditionToAPI(e.GetServing()); err != nil {
			return nil, wrap(field+".serving", err)
		}
		if ep.Conditions.Terminating, err = conditionToAPI(e.GetTerminating()); err != nil {
			return nil, wrap(field+".terminating", err)
		}
		if len(e.GetHintZones()) > 0 || len(e.GetHintNodes()) > 0 {
			ep.Hints = &discovery.EndpointHints{}
			for _, z := range e.GetHintZones() {
				ep.Hints.ForZones = append(ep.Hints.ForZones, discovery.ForZone{Name: z})
			}
			for _, n := range e.GetHintNodes() {
				ep.Hints.ForNodes = append(ep.Hints.ForNodes, discovery.ForNode{Name: n})
			}
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s, nil
}

// NodeFromAPI converts this node's Node.
func NodeFromAPI(n *v1.Node) *Node {
	out := &Node{Name: n.Name, Labels: n.Labels, Deleting: n.DeletionTimestamp != nil, ResourceVersion: n.ResourceVersion}
	for _, t := range n.Spec.Taints {
		out.TaintKeys = append(out.TaintKeys, t.Key)
	}
	for _, a := range n.Status.Addresses {
		out.Addresses = append(out.Addresses, &NodeAddress{Type: string(a.Type), Address: a.Address})
	}
	out.PodCidrs = slices.Clone(n.Spec.PodCIDRs)
	return out
}

// NodeToAPI rebuilds a Node with the labels, taints and deletion state kube-proxy reads.
func NodeToAPI(g *Node) (*v1.Node, error) {
	if g.GetName() == "" {
		return nil, fmt.Errorf("node: name: missing")
	}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: g.GetName(), Labels: maps.Clone(g.GetLabels()), ResourceVersion: g.GetResourceVersion()}}
	if g.GetDeleting() {
		// The time is not carried: only whether it is set matters to a proxy.
		ts := metav1.NewTime(time.Unix(0, 0))
		n.DeletionTimestamp = &ts
	}
	for _, k := range g.GetTaintKeys() {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: k, Effect: v1.TaintEffectNoSchedule})
	}
	for i, a := range g.GetAddresses() {
		t := v1.NodeAddressType(a.GetType())
		if (t == v1.NodeInternalIP || t == v1.NodeExternalIP) && net.ParseIP(a.GetAddress()) == nil {
			return nil, fmt.Errorf("node %s: addresses[%d]: %s %q is not an IP address", g.GetName(), i, t, a.GetAddress())
		}
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: t, Address: a.GetAddress()})
	}
	for i, c := range g.GetPodCidrs() {
		if _, _, err := net.ParseCIDR(c); err != nil {
			return nil, fmt.Errorf("node %s: pod_cidrs[%d]: %q is not a CIDR", g.GetName(), i, c)
		}
		n.Spec.PodCIDRs = append(n.Spec.PodCIDRs, c)
	}
	if len(n.Spec.PodCIDRs) > 0 {
		n.Spec.PodCIDR = n.Spec.PodCIDRs[0]
	}
	return n, nil
}
