//go:build linux

package conntrack

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	netutils "k8s.io/utils/net"
	"k8s.io/utils/ptr"

	fakeconntrack "k8s.io/net-utils/conntrack/testing"

	"k8s.io/kube-proxy/pkg/proxy"
)

const (
	clusterIP      = "172.30.1.1"
	externalIP     = "192.168.99.100"
	lbIP           = "1.2.3.4"
	servingEP      = "10.240.0.4"
	nonServingEP   = "10.240.1.5"
	terminatingEP  = "10.240.3.7"
	deletedEP      = "10.240.2.6"
	oldEPPort      = 8080
	epPort         = 9090
	svcPort        = 8000
	nodePort       = 32000
	otherPort      = 3000
	otherClusterIP = "172.30.9.9" // a TCP-only service sharing the UDP node port number as its port
)

func flow(dst string, dport uint16, replySrc string, rport uint16, proto uint8) *netlink.ConntrackFlow {
	f := &netlink.ConntrackFlow{
		FamilyType: unix.AF_INET,
		Forward:    netlink.IPTuple{SrcIP: netutils.ParseIPSloppy("10.9.9.9"), SrcPort: 40000, DstIP: netutils.ParseIPSloppy(dst), DstPort: dport, Protocol: proto},
		Reverse:    netlink.IPTuple{SrcIP: netutils.ParseIPSloppy(replySrc), SrcPort: rport, DstIP: netutils.ParseIPSloppy("10.9.9.9"), DstPort: 40000, Protocol: proto},
	}
	return f
}

func testMaps(t *testing.T) (proxy.ServicePortMap, proxy.EndpointsMap) {
	t.Helper()
	sct := proxy.NewServiceChangeTracker(v1.IPv4Protocol, nil, nil)
	sct.Update(nil, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "test", Name: "svc"},
		Spec: v1.ServiceSpec{
			Type:        v1.ServiceTypeLoadBalancer,
			ClusterIP:   clusterIP,
			ExternalIPs: []string{externalIP},
			Ports: []v1.ServicePort{
				{Name: "tcp", Port: svcPort, NodePort: nodePort, Protocol: v1.ProtocolTCP},
				{Name: "udp", Port: svcPort, NodePort: nodePort, Protocol: v1.ProtocolUDP},
				{Name: "sctp", Port: svcPort, NodePort: nodePort, Protocol: v1.ProtocolSCTP},
			},
		},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: lbIP}}}},
	})
	// A UDP service whose cluster port equals the other's node port: its
	// flows must be judged by its own endpoints only.
	sct.Update(nil, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "test", Name: "other"},
		Spec: v1.ServiceSpec{
			ClusterIP: otherClusterIP,
			Ports:     []v1.ServicePort{{Name: "udp", Port: nodePort, Protocol: v1.ProtocolUDP}},
		},
	})
	sm := proxy.ServicePortMap{}
	sm.Update(sct)

	ect := proxy.NewEndpointsChangeTracker(v1.IPv4Protocol, "node", nil, nil)
	ports := []discovery.EndpointPort{
		{Name: ptr.To("tcp"), Port: ptr.To[int32](epPort), Protocol: ptr.To(v1.ProtocolTCP)},
		{Name: ptr.To("udp"), Port: ptr.To[int32](epPort), Protocol: ptr.To(v1.ProtocolUDP)},
		{Name: ptr.To("sctp"), Port: ptr.To[int32](epPort), Protocol: ptr.To(v1.ProtocolSCTP)},
	}
	ect.EndpointSliceUpdate(&discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "test", Name: "svc-1", Labels: map[string]string{discovery.LabelServiceName: "svc"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{servingEP}, Conditions: discovery.EndpointConditions{Serving: ptr.To(true)}},
			{Addresses: []string{nonServingEP}, Conditions: discovery.EndpointConditions{Serving: ptr.To(false)}},
			{Addresses: []string{terminatingEP}, Conditions: discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}},
		},
		Ports: ports,
	}, false)
	ect.EndpointSliceUpdate(&discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "test", Name: "other-1", Labels: map[string]string{discovery.LabelServiceName: "other"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   []discovery.Endpoint{{Addresses: []string{"10.250.0.1"}}},
		Ports:       []discovery.EndpointPort{{Name: ptr.To("udp"), Port: ptr.To[int32](53), Protocol: ptr.To(v1.ProtocolUDP)}},
	}, false)
	em := proxy.EndpointsMap{}
	em.Update(ect)
	return sm, em
}

func TestCleanStaleEntries(t *testing.T) {
	tests := []struct {
		name  string
		flow  *netlink.ConntrackFlow
		stale bool
	}{
		{"UDP cluster IP to serving endpoint", flow(clusterIP, svcPort, servingEP, epPort, unix.IPPROTO_UDP), false},
		{"UDP cluster IP to terminating-but-serving endpoint", flow(clusterIP, svcPort, terminatingEP, epPort, unix.IPPROTO_UDP), false},
		{"UDP cluster IP to non-serving endpoint", flow(clusterIP, svcPort, nonServingEP, epPort, unix.IPPROTO_UDP), true},
		{"UDP cluster IP to deleted endpoint", flow(clusterIP, svcPort, deletedEP, epPort, unix.IPPROTO_UDP), true},
		{"UDP cluster IP to endpoint's old port", flow(clusterIP, svcPort, servingEP, oldEPPort, unix.IPPROTO_UDP), true},
		{"UDP external IP to serving endpoint", flow(externalIP, svcPort, servingEP, epPort, unix.IPPROTO_UDP), false},
		{"UDP external IP to deleted endpoint", flow(externalIP, svcPort, deletedEP, epPort, unix.IPPROTO_UDP), true},
		{"UDP LB IP to serving endpoint", flow(lbIP, svcPort, servingEP, epPort, unix.IPPROTO_UDP), false},
		{"UDP LB IP to non-serving endpoint", flow(lbIP, svcPort, nonServingEP, epPort, unix.IPPROTO_UDP), true},
		{"UDP node port to serving endpoint", flow("192.168.1.1", nodePort, servingEP, epPort, unix.IPPROTO_UDP), false},
		{"UDP node port to deleted endpoint", flow("192.168.1.1", nodePort, deletedEP, epPort, unix.IPPROTO_UDP), true},
		{"UDP to an unrelated port is left alone", flow(clusterIP, otherPort, deletedEP, epPort, unix.IPPROTO_UDP), false},
		{"UDP to an unrelated IP and port is left alone", flow("8.8.8.8", 53, "8.8.8.8", 53, unix.IPPROTO_UDP), false},
		{"TCP to deleted endpoint is left alone", flow(clusterIP, svcPort, deletedEP, epPort, unix.IPPROTO_TCP), false},
		{"SCTP to deleted endpoint is left alone", flow(clusterIP, svcPort, deletedEP, epPort, unix.IPPROTO_SCTP), false},
		{"UDP service whose port equals a node port, to its own endpoint", flow(otherClusterIP, nodePort, "10.250.0.1", 53, unix.IPPROTO_UDP), false},
		{"UDP service whose port equals a node port, to a stale endpoint", flow(otherClusterIP, nodePort, deletedEP, 53, unix.IPPROTO_UDP), true},
	}
	sm, em := testMaps(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ct := fakeconntrack.NewFake(tc.flow)
			CleanStaleEntries(ct, v1.IPv4Protocol, sm, em)
			deleted := len(ct.Entries()) == 0
			if deleted != tc.stale {
				t.Errorf("deleted = %v, want %v", deleted, tc.stale)
			}
		})
	}

	t.Run("all together in one pass", func(t *testing.T) {
		ct := fakeconntrack.NewFake()
		want := 0
		for _, tc := range tests {
			ct.AddEntries(tc.flow)
			if tc.stale {
				want++
			}
		}
		CleanStaleEntries(ct, v1.IPv4Protocol, sm, em)
		if got := len(ct.Deleted()); got != want {
			t.Errorf("deleted %d entries, want %d", got, want)
		}
		if ct.ListCalls != 1 || ct.DeleteCalls > 1 {
			t.Errorf("want one list and at most one delete call, got %d and %d", ct.ListCalls, ct.DeleteCalls)
		}
	})
}

func TestCleanStaleEntriesNodePortWithoutEndpoints(t *testing.T) {
	// With no endpoints, node port traffic is rejected by the rules; there is
	// nothing to redirect, so node port flows are not touched. Cluster IP
	// flows are stale, though.
	sct := proxy.NewServiceChangeTracker(v1.IPv4Protocol, nil, nil)
	sct.Update(nil, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "np"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ClusterIP: clusterIP,
			Ports: []v1.ServicePort{{Name: "u", Port: svcPort, NodePort: nodePort, Protocol: v1.ProtocolUDP}}},
	})
	sm := proxy.ServicePortMap{}
	sm.Update(sct)
	ct := fakeconntrack.NewFake(
		flow("192.168.1.1", nodePort, deletedEP, epPort, unix.IPPROTO_UDP),
		flow(clusterIP, svcPort, deletedEP, epPort, unix.IPPROTO_UDP),
	)
	CleanStaleEntries(ct, v1.IPv4Protocol, sm, proxy.EndpointsMap{})
	if got := ct.Entries(); len(got) != 1 || got[0].Forward.DstPort != nodePort {
		t.Errorf("want only the node port flow kept, got %v", got)
	}
}

func TestCleanStaleEntriesErrors(t *testing.T) {
	sm, em := testMaps(t)
	stale := flow(clusterIP, svcPort, deletedEP, epPort, unix.IPPROTO_UDP)
	tests := []struct {
		name        string
		listErr     error
		deleteErr   error
		wantDeleted bool
	}{
		{name: "list fails: nothing deleted", listErr: errors.New("boom")},
		{name: "interrupted list: partial result still cleaned", listErr: fmt.Errorf("dump: %w", unix.EINTR), wantDeleted: true},
		{name: "delete fails: logged, no panic", deleteErr: errors.New("boom")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ct := fakeconntrack.NewFake(stale)
			ct.ListErr, ct.DeleteErr = tc.listErr, tc.deleteErr
			CleanStaleEntries(ct, v1.IPv4Protocol, sm, em)
			if got := len(ct.Deleted()) > 0; got != tc.wantDeleted {
				t.Errorf("deleted = %v, want %v", got, tc.wantDeleted)
			}
		})
	}
}

func TestCleanStaleEntriesIPv6(t *testing.T) {
	sct := proxy.NewServiceChangeTracker(v1.IPv6Protocol, nil, nil)
	sct.Update(nil, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v6"},
		Spec:       v1.ServiceSpec{ClusterIP: "fd00::10", Ports: []v1.ServicePort{{Name: "u", Port: 53, Protocol: v1.ProtocolUDP}}},
	})
	sm := proxy.ServicePortMap{}
	sm.Update(sct)
	ect := proxy.NewEndpointsChangeTracker(v1.IPv6Protocol, "node", nil, nil)
	ect.EndpointSliceUpdate(&discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "v6-1", Labels: map[string]string{discovery.LabelServiceName: "v6"}},
		AddressType: discovery.AddressTypeIPv6,
		Endpoints:   []discovery.Endpoint{{Addresses: []string{"fd00:1::1"}}},
		Ports:       []discovery.EndpointPort{{Name: ptr.To("u"), Port: ptr.To[int32](5353), Protocol: ptr.To(v1.ProtocolUDP)}},
	}, false)
	em := proxy.EndpointsMap{}
	em.Update(ect)

	mk := func(replySrc string) *netlink.ConntrackFlow {
		f := flow("fd00::10", 53, replySrc, 5353, unix.IPPROTO_UDP)
		f.FamilyType = unix.AF_INET6
		f.Forward.SrcIP = netutils.ParseIPSloppy("fd00:9::9")
		f.Reverse.DstIP = f.Forward.SrcIP
		return f
	}
	ct := fakeconntrack.NewFake(mk("fd00:1::1"), mk("fd00:1::2"))
	CleanStaleEntries(ct, v1.IPv6Protocol, sm, em)
	if d := ct.Deleted(); len(d) != 1 || d[0].Reverse.SrcIP.String() != "fd00:1::2" {
		t.Errorf("deleted %v, want only the flow to fd00:1::2", d)
	}
}

func TestCleanStaleEntriesNilMapEntries(t *testing.T) {
	// Third-party proxiers fill these maps themselves; a nil entry must not
	// stop the cleanup of the well-formed services around it.
	sm, em := testMaps(t)
	sm[proxy.ServicePortName{Port: "nil"}] = nil
	udp := proxy.ServicePortName{Port: "udp", Protocol: v1.ProtocolUDP}
	udp.Namespace, udp.Name = "test", "svc"
	em[udp] = append([]proxy.Endpoint{nil}, em[udp]...)

	ct := fakeconntrack.NewFake(
		flow(clusterIP, svcPort, servingEP, epPort, unix.IPPROTO_UDP),
		flow(clusterIP, svcPort, deletedEP, epPort, unix.IPPROTO_UDP),
	)
	CleanStaleEntries(ct, v1.IPv4Protocol, sm, em)
	if d := ct.Deleted(); len(d) != 1 || d[0].Reverse.SrcIP.String() != deletedEP {
		t.Errorf("deleted %v, want only the flow to %s", d, deletedEP)
	}
}
