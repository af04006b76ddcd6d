//go:build linux

package nftables

import (
	"net"
	"strconv"
	"strings"

	"k8s.io/kube-proxy/pkg/proxy"
)

// tsvc describes a service port for syncer-level tests. It stands in for what
// the brain (pkg/proxy CategorizeEndpoints) hands the backend, with a simple
// categorisation: ready endpoints are cluster endpoints, ready local ones are
// local endpoints.
type tsvc struct {
	ns, name, portName string
	proto              string
	clusterIP          string
	port, nodePort     int
	externalIPs        []string
	lbIPs              []string
	sourceRanges       []string
	affinitySeconds    int
	extLocal, intLocal bool
	eps                []tep
}

type tep struct {
	ip    string
	port  int
	local bool
}

// model converts t, mapping addresses with ip (identity for IPv4).
func (t tsvc) model(ip func(string) string) *serviceModel {
	proto := t.proto
	if proto == "" {
		proto = "tcp"
	}
	m := &serviceModel{
		owner:     t.ns + "/" + t.name,
		protocol:  proto,
		clusterIP: ip(t.clusterIP),
		port:      t.port,
		nodePort:  t.nodePort,
	}
	if t.portName != "" {
		m.owner += ":" + t.portName
	}
	for _, e := range t.externalIPs {
		m.externalIPs = append(m.externalIPs, ip(e))
	}
	for _, e := range t.lbIPs {
		m.lbVIPs = append(m.lbVIPs, ip(e))
	}
	for _, r := range t.sourceRanges {
		_, n, err := net.ParseCIDR(ip(r))
		if err != nil {
			panic(err)
		}
		m.sourceRanges = append(m.sourceRanges, n)
	}
	m.affinity = t.affinitySeconds > 0
	m.stickySeconds = t.affinitySeconds
	m.externalPolicyLocal = t.extLocal
	m.internalPolicyLocal = t.intLocal
	m.externallyAccessible = t.nodePort != 0 || len(t.externalIPs) > 0 || len(t.lbIPs) > 0
	usesClusterEndpoints := !t.intLocal || (m.externallyAccessible && !t.extLocal)
	usesLocalEndpoints := t.intLocal || (m.externallyAccessible && t.extLocal)
	newServiceChains(m, t.ns, t.name, t.portName)
	for _, e := range t.eps {
		em := newEndpointModel(t.ns, t.name, proto, t.portName, ip(e.ip), e.port, e.local)
		m.clusterEndpoints = append(m.clusterEndpoints, em)
		if e.local {
			m.localEndpoints = append(m.localEndpoints, em)
		}
	}
	m.hasEndpoints = len(m.clusterEndpoints) > 0
	m.usesCluster = usesClusterEndpoints && len(m.clusterEndpoints) > 0
	m.usesLocal = usesLocalEndpoints && len(m.localEndpoints) > 0
	action := func(local bool) proxy.NoEndpointsAction {
		switch {
		case !m.hasEndpoints:
			return proxy.Reject
		case local && len(m.localEndpoints) == 0:
			return proxy.Drop
		}
		return proxy.Forward
	}
	m.internal, m.external = action(t.intLocal), action(t.extLocal)
	if usesClusterEndpoints {
		m.reachableEndpoints = m.clusterEndpoints
	} else {
		m.reachableEndpoints = m.localEndpoints
	}
	return m
}

func models(ip func(string) string, svcs ...tsvc) []*serviceModel {
	out := make([]*serviceModel, 0, len(svcs))
	for _, s := range svcs {
		out = append(out, s.model(ip))
	}
	return out
}

// testServices covers every service shape the backend distinguishes.
var testServices = []tsvc{
	// plain ClusterIP, one endpoint
	{ns: "ns1", name: "svc1", portName: "p80", clusterIP: "172.30.0.41", port: 80, eps: []tep{{ip: "10.180.0.1", port: 80}}},
	// NodePort + externalIP + LoadBalancer with source ranges, cluster policy, two endpoints
	{ns: "ns2", name: "svc2", portName: "p80", clusterIP: "172.30.0.42", port: 80, nodePort: 3001,
		externalIPs: []string{"192.168.99.22"}, lbIPs: []string{"1.2.3.4"}, sourceRanges: []string{"203.0.113.0/25"},
		eps: []tep{{ip: "10.180.0.2", port: 80}, {ip: "10.180.1.2", port: 80}}},
	// externalTrafficPolicy Local with a local and a remote endpoint
	{ns: "ns3", name: "svc3", portName: "p80", clusterIP: "172.30.0.43", port: 80, nodePort: 3003, lbIPs: []string{"5.6.7.8"}, extLocal: true,
		eps: []tep{{ip: "10.180.0.3", port: 80, local: true}, {ip: "10.180.2.3", port: 80}}},
	// no endpoints at all
	{ns: "ns4", name: "svc4", portName: "p80", clusterIP: "172.30.0.44", port: 80, nodePort: 3004, externalIPs: []string{"192.168.99.44"}},
	// externalTrafficPolicy Local without local endpoints
	{ns: "ns5", name: "svc5", portName: "p80", clusterIP: "172.30.0.45", port: 80, nodePort: 3005, lbIPs: []string{"5.6.7.9"}, extLocal: true,
		eps: []tep{{ip: "10.180.2.5", port: 80}}},
	// internalTrafficPolicy Local without local endpoints
	{ns: "ns6", name: "svc6", portName: "p80", clusterIP: "172.30.0.46", port: 80, intLocal: true,
		eps: []tep{{ip: "10.180.2.6", port: 80}}},
	// ClientIP session affinity
	{ns: "ns7", name: "svc7", portName: "p80", clusterIP: "172.30.0.47", port: 80, affinitySeconds: 10800,
		eps: []tep{{ip: "10.180.0.7", port: 80}, {ip: "10.180.1.7", port: 8080}}},
	// UDP, unnamed port
	{ns: "ns8", name: "svc8", proto: "udp", clusterIP: "172.30.0.48", port: 53, eps: []tep{{ip: "10.180.0.8", port: 5353, local: true}}},
	// second port of svc1, sharing the cluster IP
	{ns: "ns1", name: "svc1", portName: "p443", clusterIP: "172.30.0.41", port: 443, eps: []tep{{ip: "10.180.0.1", port: 443}}},
}

// ep formats "ip:port" in the right family.
func ep(ip func(string) string, addr string, port int) string {
	return net.JoinHostPort(ip(addr), itoa(port))
}

func eps(ip func(string) string, addrs ...string) []string {
	var out []string
	for _, a := range addrs {
		h, p, _ := strings.Cut(a, ":")
		out = append(out, net.JoinHostPort(ip(h), p))
	}
	return out
}

// newEndpointModel builds an endpoint model as the proxier does from the
// node-local model.
func newEndpointModel(namespace, name, protocol, portName, ip string, port int, local bool) *endpointModel {
	return &endpointModel{
		ip:        ip,
		port:      port,
		local:     local,
		endpoint:  net.JoinHostPort(ip, strconv.Itoa(port)),
		namespace: namespace,
		name:      name,
		protocol:  protocol,
		portName:  portName,
	}
}
