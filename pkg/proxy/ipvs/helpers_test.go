//go:build linux

package ipvs

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilipvs "k8s.io/net-utils/ipvs"
	"k8s.io/utils/ptr"
)

func makeService(ns, name string, tweak func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, SessionAffinity: v1.ServiceAffinityNone},
	}
	tweak(svc)
	if len(svc.Spec.ClusterIPs) == 0 && svc.Spec.ClusterIP != "" {
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
	return svc
}

func svcPort(name string, port int32, proto v1.Protocol, nodePort int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Port: port, Protocol: proto, NodePort: nodePort, TargetPort: intstr.FromInt32(port)}
}

// ep describes one endpoint of a slice.
type ep struct {
	ip          string
	node        string // "" is another node
	notReady    bool
	terminating bool
	serving     *bool
	zoneHint    string
}

func makeSlice(ns, svcName, sliceName string, ipv6 bool, ports []discovery.EndpointPort, eps ...ep) *discovery.EndpointSlice {
	at := discovery.AddressTypeIPv4
	if ipv6 {
		at = discovery.AddressTypeIPv6
	}
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sliceName,
			Labels: map[string]string{discovery.LabelServiceName: svcName}},
		AddressType: at,
		Ports:       ports,
	}
	for _, e := range eps {
		node := e.node
		if node == "" {
			node = "other-node"
		}
		de := discovery.Endpoint{
			Addresses: []string{e.ip},
			NodeName:  ptr.To(node),
			Conditions: discovery.EndpointConditions{
				Ready:       ptr.To(!e.notReady),
				Serving:     e.serving,
				Terminating: ptr.To(e.terminating),
			},
		}
		if e.zoneHint != "" {
			de.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: e.zoneHint}}}
		}
		s.Endpoints = append(s.Endpoints, de)
	}
	return s
}

func slicePort(name string, port int32, proto v1.Protocol) discovery.EndpointPort {
	return discovery.EndpointPort{Name: ptr.To(name), Port: ptr.To(port), Protocol: ptr.To(proto)}
}

// dump is the whole programmed state as text: virtual and real servers,
// ip set entries, kube-ipvs0's addresses and the iptables rules, for
// comparing two proxiers.
func (e *fakeEnv) dump(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	vss, _ := e.ipvs.GetVirtualServers()
	for _, vs := range vss {
		fmt.Fprintf(&b, "vs %s %s flags=%#x timeout=%d\n", vs, vs.Scheduler, vs.Flags, vs.Timeout)
		rss, _ := e.ipvs.GetRealServers(vs)
		lines := make([]string, 0, len(rss))
		for _, rs := range rss {
			lines = append(lines, fmt.Sprintf("  rs %s weight=%d", rs, rs.Weight))
		}
		sort.Strings(lines)
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	names, _ := e.ipset.ListSets()
	for _, n := range names {
		entries, _ := e.ipset.ListEntries(n)
		fmt.Fprintf(&b, "set %s %s\n", n, strings.Join(entries, " "))
	}
	bound, _ := e.netlink.ListBindAddress(defaultDummyDevice)
	bound = slices.Clone(bound)
	sort.Strings(bound)
	fmt.Fprintf(&b, "kube-ipvs0 %s\n", strings.Join(bound, " "))
	for _, table := range []string{"nat", "filter"} {
		var buf strings.Builder
		var bb = new(bytesBuffer)
		if err := e.ipt.SaveInto(tableName(table), &bb.Buffer); err != nil {
			t.Fatalf("save %s: %v", table, err)
		}
		buf.WriteString(bb.String())
		b.WriteString(buf.String())
	}
	return b.String()
}

func realServersOf(t testing.TB, e *fakeEnv, vs *utilipvs.VirtualServer) []string {
	t.Helper()
	rss, err := e.ipvs.GetRealServers(vs)
	if err != nil {
		t.Fatalf("GetRealServers(%s): %v", vs, err)
	}
	var out []string
	for _, rs := range rss {
		out = append(out, rs.String())
	}
	sort.Strings(out)
	return out
}
