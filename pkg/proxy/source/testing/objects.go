// Package testing builds the Kubernetes objects that sources deliver (Services,
// EndpointSlices, Nodes) from compact arguments, for tests of proxies written with this
// library. The objects are complete enough for the brain: cluster IPs, families, ports and
// conditions are set the way the API server would default them.
//
// The module's proxiers build their test fixtures here too (fixtures.go: objects stated
// field by field, for tests that feed odd ones), and sub-package behaviour holds the one
// behaviour table they all run.
//
// Allowed imports: the standard library and k8s.io/{api,apimachinery,utils}.
package testing

import (
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Service returns a ClusterIP Service with one TCP port named "http" (port 80, target
// 8080) on each of clusterIPs, then applies every mutate in order.
func Service(namespace, name string, clusterIPs []string, mutate ...func(*v1.Service)) *v1.Service {
	svc := NewService(namespace, name, ClusterIPs(clusterIPs...), Ports(v1.ServicePort{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}))
	svc.ResourceVersion = "1"
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

// Ports replaces the Service's ports.
func Ports(ports ...v1.ServicePort) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.Ports = ports }
}

// NodePort makes the Service a NodePort service with node port np on its first port.
func NodePort(np int32) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
		s.Spec.Ports[0].NodePort = np
	}
}

// LoadBalancer makes the Service a LoadBalancer with node port np and ingress IPs vips.
func LoadBalancer(np int32, vips ...string) func(*v1.Service) {
	return func(s *v1.Service) {
		NodePort(np)(s)
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = nil
		for _, ip := range vips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
		}
	}
}

// ExternalLocal sets externalTrafficPolicy Local, with health check node port hc.
func ExternalLocal(hc int32) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hc
	}
}

// InternalLocal sets internalTrafficPolicy Local.
func InternalLocal() func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal) }
}

// ClientIPAffinity sets ClientIP session affinity with timeout seconds.
func ClientIPAffinity(seconds int32) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(seconds)}}
	}
}

// ExternalIPs sets spec.externalIPs.
func ExternalIPs(ips ...string) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.ExternalIPs = ips }
}

// Endpoint returns a ready, serving, non-terminating endpoint at ip on node (empty for
// none), then applies mutate.
func Endpoint(ip, node string, mutate ...func(*discovery.Endpoint)) discovery.Endpoint {
	ep := EP{IP: ip, Node: node}.Endpoint()
	for _, m := range mutate {
		m(&ep)
	}
	return ep
}

// Terminating marks an endpoint terminating and not ready; serving says whether it still
// serves.
func Terminating(serving bool) func(*discovery.Endpoint) {
	return func(e *discovery.Endpoint) {
		e.Conditions = discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(serving), Terminating: ptr.To(true)}
	}
}

// NotReady marks an endpoint not ready and not serving (a failing readiness probe).
func NotReady() func(*discovery.Endpoint) {
	return func(e *discovery.Endpoint) {
		e.Conditions = discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(false)}
	}
}

// Zone sets the endpoint's zone and, when hints is true, a zone hint for the same zone.
func Zone(zone string, hints bool) func(*discovery.Endpoint) {
	return func(e *discovery.Endpoint) {
		e.Zone = ptr.To(zone)
		if hints {
			e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: zone}}}
		}
	}
}

// EndpointSlice returns slice sliceName of Service namespace/service with one port
// (portName, TCP, port) and the given endpoints; the address type follows the first
// endpoint's address.
func EndpointSlice(namespace, service, sliceName, portName string, port int32, endpoints ...discovery.Endpoint) *discovery.EndpointSlice {
	at := discovery.AddressTypeIPv4
	if len(endpoints) > 0 && len(endpoints[0].Addresses) > 0 {
		at = AddressTypeOf(FamilyOf(endpoints[0].Addresses[0]))
	}
	s := NewSlice(namespace, service, sliceName, at, func(s *discovery.EndpointSlice) {
		s.Ports = []discovery.EndpointPort{SlicePort(portName, port, v1.ProtocolTCP)}
		s.Endpoints = endpoints
	})
	s.ResourceVersion = "1"
	return s
}

// Node returns a Node named name in zone (no zone label when empty).
func Node(name, zone string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Labels: map[string]string{"kubernetes.io/hostname": name}}}
	if zone != "" {
		n.Labels[v1.LabelTopologyZone] = zone
	}
	return n
}
