package testing

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The builders below are the proxiers' test fixtures. Unlike Service and
// EndpointSlice above they start from nothing (no port, no address type
// guessed), because the proxiers' tests state every port and family
// themselves and some of them feed deliberately odd objects.

// NewService returns a ClusterIP Service with no ports and no cluster IP,
// then applies every mutate in order. A mutate that sets only
// spec.clusterIP gets spec.clusterIPs filled from it afterwards, as the API
// server does, so tests need not say the address twice.
func NewService(namespace, name string, mutate ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, SessionAffinity: v1.ServiceAffinityNone},
	}
	for _, m := range mutate {
		if m != nil {
			m(svc)
		}
	}
	if len(svc.Spec.ClusterIPs) == 0 && svc.Spec.ClusterIP != "" {
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
	return svc
}

// ServicePort is a Service port whose target port is the same number; a
// nodePort of 0 means none.
func ServicePort(name string, port int32, proto v1.Protocol, nodePort int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Port: port, Protocol: proto, NodePort: nodePort, TargetPort: intstr.FromInt32(port)}
}

// ClusterIPs sets spec.clusterIP, spec.clusterIPs and spec.ipFamilies from
// ips (one per family, primary first): what a dual-stack Service looks like
// once the API server has allocated it.
func ClusterIPs(ips ...string) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = "", nil, nil
		if len(ips) == 0 {
			return
		}
		s.Spec.ClusterIP = ips[0]
		s.Spec.ClusterIPs = append([]string(nil), ips...)
		for _, ip := range ips {
			s.Spec.IPFamilies = append(s.Spec.IPFamilies, FamilyOf(ip))
		}
	}
}

// SourceRanges sets spec.loadBalancerSourceRanges.
func SourceRanges(cidrs ...string) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = cidrs }
}

// FamilyOf is the IP family of an address or CIDR; anything that does not
// parse as IPv6 counts as IPv4.
func FamilyOf(ip string) v1.IPFamily {
	if p, err := netip.ParsePrefix(ip); err == nil && p.Addr().Is6() {
		return v1.IPv6Protocol
	}
	if a, err := netip.ParseAddr(ip); err == nil && a.Is6() {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

// AddressTypeOf is the EndpointSlice address type of a family.
func AddressTypeOf(family v1.IPFamily) discovery.AddressType {
	if family == v1.IPv6Protocol {
		return discovery.AddressTypeIPv6
	}
	return discovery.AddressTypeIPv4
}

// SlicePort is an EndpointSlice port.
func SlicePort(name string, port int32, proto v1.Protocol) discovery.EndpointPort {
	return discovery.EndpointPort{Name: ptr.To(name), Port: ptr.To(port), Protocol: ptr.To(proto)}
}

// EP describes one endpoint of a slice compactly; the zero value of each
// field is the common case (ready, serving, not terminating, no hints).
type EP struct {
	IP string
	// Node is the endpoint's node; "" leaves spec.nodeName unset, which
	// the brain treats as another node.
	Node string
	// NotReady fails the readiness condition (a failing probe).
	NotReady bool
	// Terminating marks the pod as terminating, which also makes it not
	// ready, as the EndpointSlice controller reports it.
	Terminating bool
	// NotServing says the pod no longer serves (meaningful when
	// terminating: the brain falls back only to serving endpoints).
	NotServing bool
	// Zones are the endpoint's zone hints.
	Zones []string
}

// Endpoint is the discovery.Endpoint e describes.
func (e EP) Endpoint() discovery.Endpoint {
	de := discovery.Endpoint{
		Addresses: []string{e.IP},
		Conditions: discovery.EndpointConditions{
			Ready:       ptr.To(!e.NotReady && !e.Terminating),
			Serving:     ptr.To(!e.NotServing),
			Terminating: ptr.To(e.Terminating),
		},
	}
	if e.Node != "" {
		de.NodeName = ptr.To(e.Node)
	}
	if len(e.Zones) > 0 {
		de.Hints = &discovery.EndpointHints{}
		for _, z := range e.Zones {
			de.Hints.ForZones = append(de.Hints.ForZones, discovery.ForZone{Name: z})
		}
	}
	return de
}

// Slice returns EndpointSlice sliceName of Service namespace/service with
// the given address type, ports and endpoints.
func Slice(namespace, service, sliceName string, at discovery.AddressType, ports []discovery.EndpointPort, eps ...EP) *discovery.EndpointSlice {
	return NewSlice(namespace, service, sliceName, at, func(s *discovery.EndpointSlice) {
		s.Ports = ports
		for _, e := range eps {
			s.Endpoints = append(s.Endpoints, e.Endpoint())
		}
	})
}

// NewSlice returns an empty EndpointSlice sliceName of Service
// namespace/service, then applies every mutate in order.
func NewSlice(namespace, service, sliceName string, at discovery.AddressType, mutate ...func(*discovery.EndpointSlice)) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: sliceName,
			Labels: map[string]string{discovery.LabelServiceName: service},
		},
		AddressType: at,
	}
	for _, m := range mutate {
		if m != nil {
			m(s)
		}
	}
	return s
}

// EndpointWith is an endpoint at ip on node with every condition stated,
// for tests that feed combinations the EndpointSlice controller would not
// write (ready and terminating at once, say).
func EndpointWith(ip, node string, ready, serving, terminating bool) discovery.Endpoint {
	return discovery.Endpoint{
		Addresses:  []string{ip},
		NodeName:   ptr.To(node),
		Conditions: discovery.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating)},
	}
}
