//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

const testNamespace = "e2e"

// epState is an endpoint's lifecycle stage, as the EndpointSlice controller reports it.
type epState int

const (
	epReady       epState = iota
	epTerminating         // ready=false, serving=true, terminating=true: graceful shutdown
)

type endpoint struct {
	pod   *pod
	state epState
}

func ready(ps ...*pod) []endpoint {
	out := make([]endpoint, 0, len(ps))
	for _, p := range ps {
		out = append(out, endpoint{pod: p})
	}
	return out
}

// svc describes a Service with a TCP and a UDP port, both named after their
// protocol, both on port and target the pods' echo port.
type svc struct {
	name         string
	typ          v1.ServiceType
	ip4, ip6     string
	port         int32
	nodePort     int32
	externalIPs  []string
	lbIP         string
	sourceRanges []string
	affinity     int32 // ClientIP affinity timeout in seconds; 0 means none
	eTPLocal     bool
	hcNodePort   int32
	iTPLocal     bool
	eps          []endpoint
}

func (s svc) objects() []any {
	if s.typ == "" {
		s.typ = v1.ServiceTypeClusterIP
	}
	service := &v1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: testNamespace},
		Spec: v1.ServiceSpec{
			Type:        s.typ,
			ClusterIP:   s.ip4,
			ClusterIPs:  []string{s.ip4},
			IPFamilies:  []v1.IPFamily{v1.IPv4Protocol},
			ExternalIPs: s.externalIPs,
		},
	}
	if s.ip6 != "" {
		service.Spec.ClusterIPs = append(service.Spec.ClusterIPs, s.ip6)
		service.Spec.IPFamilies = append(service.Spec.IPFamilies, v1.IPv6Protocol)
		service.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
	}
	for _, proto := range []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP} {
		service.Spec.Ports = append(service.Spec.Ports, v1.ServicePort{
			Name: lower(proto), Protocol: proto, Port: s.port,
			TargetPort: intstr.FromInt32(echoPort), NodePort: s.nodePort,
		})
	}
	if s.lbIP != "" {
		service.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: s.lbIP}}
		service.Spec.LoadBalancerSourceRanges = s.sourceRanges
	}
	if s.affinity > 0 {
		service.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		service.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(s.affinity)}}
	}
	if s.eTPLocal {
		service.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		service.Spec.HealthCheckNodePort = s.hcNodePort
	} else if s.typ == v1.ServiceTypeNodePort || s.typ == v1.ServiceTypeLoadBalancer {
		service.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	}
	if s.iTPLocal {
		service.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	}
	objs := []any{service}
	families := []discovery.AddressType{discovery.AddressTypeIPv4}
	if s.ip6 != "" {
		families = append(families, discovery.AddressTypeIPv6)
	}
	for _, fam := range families {
		slice := &discovery.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%s", s.name, lower(v1.Protocol(fam))), Namespace: testNamespace,
				Labels: map[string]string{discovery.LabelServiceName: s.name},
			},
			AddressType: fam,
		}
		for _, proto := range []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP} {
			slice.Ports = append(slice.Ports, discovery.EndpointPort{
				Name: ptr.To(lower(proto)), Protocol: ptr.To(proto), Port: ptr.To[int32](echoPort),
			})
		}
		for _, ep := range s.eps {
			addr := ep.pod.ip4
			if fam == discovery.AddressTypeIPv6 {
				addr = ep.pod.ip6
			}
			cond := discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
			if ep.state == epTerminating {
				cond = discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
			}
			slice.Endpoints = append(slice.Endpoints, discovery.Endpoint{
				Addresses:  []string{addr},
				Conditions: cond,
				NodeName:   ptr.To(ep.pod.node.name),
				TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: testNamespace, Name: ep.pod.name},
			})
		}
		objs = append(objs, slice)
	}
	return objs
}

func lower(p v1.Protocol) string { return string(bytes.ToLower([]byte(p))) }

// clusterObjects are the Nodes and the ServiceCIDR.
func (w *world) clusterObjects() []any {
	var objs []any
	for _, n := range w.nodes {
		objs = append(objs, &v1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{v1.LabelHostname: n.name}},
			Spec:       v1.NodeSpec{PodCIDR: n.podCIDR4, PodCIDRs: []string{n.podCIDR4, n.podCIDR6}},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: n.lan4},
				{Type: v1.NodeInternalIP, Address: n.lan6},
				{Type: v1.NodeHostName, Address: n.name},
			}},
		})
	}
	objs = append(objs, &networkingv1.ServiceCIDR{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "ServiceCIDR"},
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{svcCIDR4, svcCIDR6}},
	})
	return objs
}

// writeManifest replaces dir/name.json with objs as a JSON stream. The rename makes
// the change atomic for kube-proxy's watcher.
func writeManifest(t testing.TB, dir, name string, objs ...any) {
	t.Helper()
	var b bytes.Buffer
	for _, o := range objs {
		data, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("encoding %s: %v", name, err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name+".json")); err != nil {
		t.Fatal(err)
	}
}

func writeService(t testing.TB, dir string, s svc) {
	t.Helper()
	writeManifest(t, dir, "svc-"+s.name, s.objects()...)
}
