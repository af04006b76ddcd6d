//go:build linux

package ipvs

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The parity scenarios are produced here and fed, unchanged, to upstream
// v1.37.2's ipvs proxier (outside this repository, see
// testdata/UPSTREAM-CAPTURE.md) and to ours (parity_random_test.go). The
// generator is the source of truth; the JSON files are its output, checked in
// so that upstream's side can be re-run without this package compiling.

var parityUpdateClusters = flag.Bool("update-parity-clusters", false, "rewrite testdata/upstream-v1.37.2-random/*.json from the generator")

const (
	parityDir      = "testdata/upstream-v1.37.2-random"
	parityNodeName = "test-hostname"
)

// parityScenario is one cluster, the node it runs on, the proxier's
// configuration and a sequence of changes, each followed by one sync.
type parityScenario struct {
	Name   string      `json:"name"`
	Family v1.IPFamily `json:"family"`
	// NodeName is the proxier's node; endpoints with this NodeName are local.
	NodeName string `json:"nodeName"`
	// NodeIP is the proxier's primary node IP (NewProxier's nodeIP).
	NodeIP string `json:"nodeIP"`
	// DualStack scenarios run an IPv4 proxier (Family) and an IPv6 one,
	// with node IP NodeIP6, on one node: one ipvs table, one set of
	// ipsets, one kube-ipvs0, an iptables and an ip6tables.
	DualStack bool   `json:"dualStack,omitempty"`
	NodeIP6   string `json:"nodeIP6,omitempty"`
	// NodeLabels are the node's topology labels, given to OnTopologyChange
	// before the first step.
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
	// Interfaces are the node's addresses in CIDR form by interface name, as
	// netlink and net.InterfaceAddrs would report them. kube-ipvs0 starts
	// absent.
	Interfaces map[string][]string `json:"interfaces"`
	Config     parityConfig        `json:"config"`
	// InitialState is what the kernel holds before the proxier starts, as
	// after a restart: it is put into the fakes before the first step.
	InitialState *parityInitialState `json:"initialState,omitempty"`
	Steps        []parityStep        `json:"steps,omitempty"`
}

// parityInitialState is kernel state left by an earlier kube-proxy.
type parityInitialState struct {
	VirtualServers []parityInitialVS `json:"virtualServers,omitempty"`
	// Bound are kube-ipvs0's addresses (kube-ipvs0 exists when set).
	Bound []string `json:"bound,omitempty"`
	// IPSets are created with their entries.
	IPSets []parityInitialSet `json:"ipsets,omitempty"`
}

type parityInitialVS struct {
	Address     string            `json:"address"`
	Port        int               `json:"port"`
	Protocol    string            `json:"protocol"`
	Scheduler   string            `json:"scheduler"`
	Flags       uint32            `json:"flags,omitempty"`
	Timeout     uint32            `json:"timeout,omitempty"`
	RealServers []parityInitialRS `json:"realServers,omitempty"`
}

type parityInitialRS struct {
	Address    string `json:"address"`
	Port       int    `json:"port"`
	Weight     int    `json:"weight"`
	ActiveConn int    `json:"activeConn,omitempty"`
}

type parityInitialSet struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Family  string   `json:"family"`
	Entries []string `json:"entries,omitempty"`
}

// parityConfig holds the KubeProxyConfiguration fields the scenarios vary.
type parityConfig struct {
	MasqueradeAll bool   `json:"masqueradeAll,omitempty"`
	Scheduler     string `json:"scheduler,omitempty"`
	StrictARP     bool   `json:"strictARP,omitempty"`
	// NodePortAddresses is KubeProxyConfiguration.NodePortAddresses.
	NodePortAddresses []string `json:"nodePortAddresses,omitempty"`
	// ClusterCIDR is given to a detect-local-by-CIDR detector; empty means
	// no local-traffic detector.
	ClusterCIDR string `json:"clusterCIDR,omitempty"`
	// ClusterCIDR6 is the IPv6 proxier's in dual-stack scenarios.
	ClusterCIDR6  string `json:"clusterCIDR6,omitempty"`
	MasqueradeBit int32  `json:"masqueradeBit"`
	// ExcludeCIDRs is KubeProxyConfiguration.IPVS.ExcludeCIDRs.
	ExcludeCIDRs []string `json:"excludeCIDRs,omitempty"`
}

// parityStep is applied to the proxier's informer handlers in name order
// (services, then slices, adds and updates before deletes) and then one sync
// runs. The first step is the initial list, after which both Synced handlers
// are called.
type parityStep struct {
	Services       []*v1.Service              `json:"services,omitempty"`
	Slices         []*discovery.EndpointSlice `json:"slices,omitempty"`
	DeleteServices []string                   `json:"deleteServices,omitempty"`
	DeleteSlices   []string                   `json:"deleteSlices,omitempty"`
	ActiveConns    []parityActiveConn         `json:"activeConns,omitempty"`
	// NoCapture steps are synced but their state is neither captured nor
	// compared, so that long change sequences stay small in testdata.
	NoCapture bool `json:"noCapture,omitempty"`
}

// parityActiveConn sets a real server's connection counts in the ipvs fake
// before the step's sync, so that graceful termination (weight 0, kept until
// drained) is exercised.
type parityActiveConn struct {
	// VirtualServer is "address:port/PROTOCOL" (IPv6 address in brackets).
	VirtualServer string `json:"virtualServer"`
	// RealServer is "address:port" (IPv6 address in brackets).
	RealServer string `json:"realServer"`
	ActiveConn int    `json:"activeConn"`
}

// parityFamily is the address plan of one family.
type parityFamily struct {
	family                        v1.IPFamily
	nodeIP, otherNodeIP           string
	interfaces                    map[string][]string
	clusterCIDR                   string
	nodePortAddresses             []string
	rangeWithNode, rangeOffNode   string
	foreignRange                  string
	clusterIP, podIP, extIP, lbIP func(i int) string
	foreignIP                     string
	// excludeCIDR holds excludedIP, a virtual server address that is not
	// kube-proxy's.
	excludeCIDR, excludedIP string
	// unmatchedCIDR holds no node address.
	unmatchedCIDR string
}

var parityFamilies = map[v1.IPFamily]parityFamily{
	v1.IPv4Protocol: {
		family: v1.IPv4Protocol, nodeIP: "192.168.0.2", otherNodeIP: "192.168.1.2",
		interfaces: map[string][]string{
			"eth0": {"192.168.0.2/24", "192.168.1.2/24", "fd00:192::2/64"},
			"lo":   {"127.0.0.1/8", "::1/128"},
		},
		clusterCIDR:       "10.0.0.0/8",
		nodePortAddresses: []string{"192.168.1.0/24", "127.0.0.0/8", "fd00:192::/64"},
		rangeWithNode:     "192.168.0.0/16", rangeOffNode: "203.0.113.0/24", foreignRange: "2001:db8::/32",
		clusterIP:   func(i int) string { return fmt.Sprintf("172.30.%d.%d", i/250, i%250+1) },
		podIP:       func(i int) string { return fmt.Sprintf("10.0.%d.%d", i/250, i%250+1) },
		extIP:       func(i int) string { return fmt.Sprintf("203.0.113.%d", i%250+1) },
		lbIP:        func(i int) string { return fmt.Sprintf("198.51.100.%d", i%250+1) },
		foreignIP:   "2001:db8:ffff::1",
		excludeCIDR: "172.31.0.0/16", excludedIP: "172.31.0.10", unmatchedCIDR: "10.99.0.0/16",
	},
	v1.IPv6Protocol: {
		family: v1.IPv6Protocol, nodeIP: "fd00:192::2", otherNodeIP: "fd00:193::2",
		interfaces: map[string][]string{
			"eth0": {"fd00:192::2/64", "fd00:193::2/64", "fe80::2/64", "192.168.0.2/24"},
			"lo":   {"::1/128", "127.0.0.1/8"},
		},
		clusterCIDR:       "fd00:10::/64",
		nodePortAddresses: []string{"fd00:193::/64", "::1/128", "192.168.0.0/16"},
		rangeWithNode:     "fd00:192::/48", rangeOffNode: "2001:db8:113::/64", foreignRange: "203.0.113.0/24",
		clusterIP:   func(i int) string { return fmt.Sprintf("fd00:30::%x", i+1) },
		podIP:       func(i int) string { return fmt.Sprintf("fd00:10::%x", i+1) },
		extIP:       func(i int) string { return fmt.Sprintf("2001:db8:113::%x", i+1) },
		lbIP:        func(i int) string { return fmt.Sprintf("2001:db8:100::%x", i+1) },
		foreignIP:   "203.0.113.250",
		excludeCIDR: "fd00:31::/64", excludedIP: "fd00:31::10", unmatchedCIDR: "fd00:99::/64",
	},
}

// parityGen builds one random cluster and its changes.
type parityGen struct {
	f      parityFamily
	rnd    *rand.Rand
	nextEP int
	svcs   map[string]*v1.Service
	slices map[string]*discovery.EndpointSlice
	// drained are endpoints removed by a drain step, by slice key, which a
	// later step may bring back while upstream still holds them at weight 0.
	drained map[string]discovery.Endpoint
	// shared makes services share addresses (see share).
	shared bool
	// hints gives some slices topology hints.
	hints bool
}

var parityProtocols = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}

func (g *parityGen) service(i int) *v1.Service {
	s := g.serviceBase(i)
	if g.shared {
		g.share(s, i)
	}
	return s
}

// share makes services share external and load balancer IPs (from a pool
// of three, and the node's own address), as IP-sharing load balancers do:
// an address must stay bound while any service uses it. Single-port
// services lose their port name.
func (g *parityGen) share(s *v1.Service, i int) {
	r, f := g.rnd, g.f
	if len(s.Spec.Ports) == 1 && r.IntN(2) == 0 {
		s.Spec.Ports[0].Name = ""
	}
	for k, ip := range s.Spec.ExternalIPs {
		if ip == f.extIP(i) {
			s.Spec.ExternalIPs[k] = f.extIP(i % 3)
		}
	}
	for k, ing := range s.Status.LoadBalancer.Ingress {
		switch ing.IP {
		case f.lbIP(i):
			s.Status.LoadBalancer.Ingress[k].IP = f.lbIP(i % 3)
		case f.lbIP(100 + i):
			s.Status.LoadBalancer.Ingress[k].IP = f.otherNodeIP
		}
	}
}

func (g *parityGen) serviceBase(i int) *v1.Service {
	r, f := g.rnd, g.f
	name := fmt.Sprintf("svc%02d", i)
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: v1.ServiceSpec{
			Type:      v1.ServiceTypeClusterIP,
			ClusterIP: f.clusterIP(i),
		},
	}
	s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	nports := 1 + r.IntN(2)
	if r.IntN(5) == 0 {
		nports = 3
	}
	// Ports are unique to the service, so that services sharing an
	// address (node, external or load balancer IPs) never claim the same
	// virtual server: upstream's result would then depend on map order.
	for p := range nports {
		proto := parityProtocols[r.IntN(len(parityProtocols))]
		port := int32(1000 + 10*i + p)
		if p == 1 && r.IntN(3) == 0 {
			// The same port number over another protocol, as DNS does.
			port = s.Spec.Ports[0].Port
			for proto == s.Spec.Ports[0].Protocol {
				proto = parityProtocols[r.IntN(len(parityProtocols))]
			}
		}
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{
			Name: fmt.Sprintf("p%d", p), Protocol: proto, Port: port,
			TargetPort: intstr.FromInt32(int32(8080 + p)),
		})
	}
	switch k := r.IntN(20); {
	case k == 0:
		// Headless: no virtual server at all.
		s.Spec.ClusterIP, s.Spec.ClusterIPs = v1.ClusterIPNone, []string{v1.ClusterIPNone}
		return s
	case k == 1:
		s.Spec.Type, s.Spec.ExternalName = v1.ServiceTypeExternalName, "example.com"
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
		return s
	case k == 2:
		// Of the other family only: this proxier ignores it.
		s.Spec.ClusterIP = parityFamilies[parityOtherFamily(f.family)].clusterIP(i)
		s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	case k < 8:
		s.Spec.Type = v1.ServiceTypeNodePort
	case k < 14:
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		ing := []v1.LoadBalancerIngress{{IP: f.lbIP(i)}}
		if r.IntN(4) == 0 {
			ing = append(ing, v1.LoadBalancerIngress{IP: f.lbIP(100 + i)})
		}
		if r.IntN(6) == 0 {
			// ipMode Proxy: the load balancer does not deliver to the VIP.
			ing = append(ing, v1.LoadBalancerIngress{IP: f.lbIP(200 + i), IPMode: ptr.To(v1.LoadBalancerIPModeProxy)})
		}
		if r.IntN(8) == 0 {
			ing = append(ing, v1.LoadBalancerIngress{IP: f.foreignIP})
		}
		s.Status.LoadBalancer.Ingress = ing
		switch r.IntN(4) {
		case 0:
			s.Spec.LoadBalancerSourceRanges = []string{f.rangeWithNode}
		case 1:
			s.Spec.LoadBalancerSourceRanges = []string{f.rangeOffNode}
		case 2:
			s.Spec.LoadBalancerSourceRanges = []string{f.rangeOffNode, f.foreignRange}
		}
		if r.IntN(5) == 0 {
			s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
		}
	}
	if s.Spec.Type == v1.ServiceTypeNodePort || s.Spec.Type == v1.ServiceTypeLoadBalancer {
		if s.Spec.AllocateLoadBalancerNodePorts == nil || *s.Spec.AllocateLoadBalancerNodePorts {
			for p := range s.Spec.Ports {
				s.Spec.Ports[p].NodePort = int32(30000 + 4*i + p)
			}
		}
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
		if r.IntN(2) == 0 {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			if s.Spec.Type == v1.ServiceTypeLoadBalancer {
				s.Spec.HealthCheckNodePort = int32(32000 + i)
			}
		}
	}
	switch r.IntN(6) {
	case 0:
		s.Spec.ExternalIPs = []string{f.extIP(i)}
	case 1:
		// An external IP that is also a node address is not bound to kube-ipvs0.
		s.Spec.ExternalIPs = []string{f.otherNodeIP, f.foreignIP}
	}
	if len(s.Spec.ExternalIPs) > 0 && s.Spec.Type == v1.ServiceTypeClusterIP && r.IntN(2) == 0 {
		// externalTrafficPolicy applies to external IPs of any type.
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}
	if r.IntN(4) == 0 {
		s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	}
	if r.IntN(4) == 0 {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		timeouts := []int32{10800, 60, 3600, 1}
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(timeouts[r.IntN(len(timeouts))])}}
	}
	return s
}

func (g *parityGen) endpoint() discovery.Endpoint {
	r := g.rnd
	g.nextEP++
	e := discovery.Endpoint{Addresses: []string{g.f.podIP(g.nextEP)}, NodeName: ptr.To("node2")}
	if r.IntN(3) == 0 {
		e.NodeName = ptr.To(parityNodeName)
	}
	switch r.IntN(8) {
	case 0: // terminating, still serving
		e.Conditions = discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	case 1: // terminating, no longer serving
		e.Conditions = discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(true)}
	case 2: // not ready
		e.Conditions = discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(false)}
	case 3: // conditions unset: ready
	default:
		e.Conditions = discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
	}
	return e
}

func (g *parityGen) slice(svc *v1.Service, n int) *discovery.EndpointSlice {
	r := g.rnd
	at := discovery.AddressTypeIPv4
	if g.f.family == v1.IPv6Protocol {
		at = discovery.AddressTypeIPv6
	}
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace, Name: fmt.Sprintf("%s-%d", svc.Name, n),
			Labels: map[string]string{discovery.LabelServiceName: svc.Name},
		},
		AddressType: at,
	}
	for _, p := range svc.Spec.Ports {
		if r.IntN(10) == 0 {
			continue // a port with no endpoints
		}
		s.Ports = append(s.Ports, discovery.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To(p.TargetPort.IntVal)})
	}
	for range r.IntN(5) {
		s.Endpoints = append(s.Endpoints, g.endpoint())
	}
	if g.hints && r.IntN(2) == 0 {
		// Topology hints on every endpoint of the slice: the zone's, and
		// sometimes the node's; whether the proxier uses them depends on
		// all ready endpoints of the service having them.
		nodeHints := r.IntN(3) == 0
		for k := range s.Endpoints {
			e := &s.Endpoints[k]
			zone := []string{"zone-a", "zone-b"}[r.IntN(2)]
			e.Zone = ptr.To(zone)
			e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: zone}}}
			if nodeHints {
				e.Hints.ForNodes = []discovery.ForNode{{Name: *e.NodeName}}
			}
		}
	}
	return s
}

func parityOtherFamily(f v1.IPFamily) v1.IPFamily {
	if f == v1.IPv4Protocol {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

func paritySliceKey(s *discovery.EndpointSlice) string { return s.Namespace + "/" + s.Name }
func parityServiceKey(s *v1.Service) string            { return s.Namespace + "/" + s.Name }

// initial returns the first step: n services with their slices.
func (g *parityGen) initial(n int) parityStep {
	var st parityStep
	for i := range n {
		svc := g.service(i)
		g.svcs[parityServiceKey(svc)] = svc
		st.Services = append(st.Services, svc)
		if svc.Spec.Type == v1.ServiceTypeExternalName || svc.Spec.ClusterIP == v1.ClusterIPNone && g.rnd.IntN(2) == 0 {
			continue
		}
		for k := range 1 + g.rnd.IntN(4)/3 {
			sl := g.slice(svc, k)
			g.slices[paritySliceKey(sl)] = sl
			st.Slices = append(st.Slices, sl)
		}
	}
	return st
}

// change returns a step with a few random edits of the current state. When
// drain is set, some of the current real servers are given connections
// first and endpoints are removed, so that upstream keeps them at weight 0.
func (g *parityGen) change(n int, drain bool) parityStep {
	r := g.rnd
	var st parityStep
	touchedSvcs, touchedSlices := map[string]bool{}, map[string]bool{}
	svcNames := paritySortedKeys(g.svcs)
	sliceNames := paritySortedKeys(g.slices)
	if drain {
		for _, k := range sliceNames {
			sl := g.slices[k]
			svc := g.svcs[sl.Namespace+"/"+sl.Labels[discovery.LabelServiceName]]
			if svc == nil || svc.Spec.ClusterIP == v1.ClusterIPNone || len(sl.Endpoints) == 0 || len(svc.Spec.ClusterIP) == 0 {
				continue
			}
			if parityIPFamily(svc.Spec.ClusterIP) != g.f.family || svc.Spec.InternalTrafficPolicy != nil || r.IntN(2) == 0 {
				continue
			}
			// Give every port of the first ready endpoint (a real server of
			// the ClusterIP virtual server) connections, then remove it.
			j := slices.IndexFunc(sl.Endpoints, func(e discovery.Endpoint) bool {
				return e.Conditions.Ready == nil || *e.Conditions.Ready
			})
			if j < 0 {
				continue
			}
			ep := sl.Endpoints[j]
			for _, sp := range svc.Spec.Ports {
				for _, p := range sl.Ports {
					if p.Name != nil && *p.Name == sp.Name && p.Protocol != nil && *p.Protocol == sp.Protocol {
						st.ActiveConns = append(st.ActiveConns, parityActiveConn{
							VirtualServer: parityJoinHostPort(svc.Spec.ClusterIP, int(sp.Port)) + "/" + string(sp.Protocol),
							RealServer:    parityJoinHostPort(ep.Addresses[0], int(*p.Port)),
							ActiveConn:    1 + r.IntN(3),
						})
					}
				}
			}
			g.drained[k] = ep
			upd := sl.DeepCopy()
			upd.Endpoints = slices.Delete(upd.Endpoints, j, j+1)
			g.slices[k] = upd
			touchedSlices[k] = true
		}
	}
	if !drain {
		for _, k := range paritySortedKeys(g.drained) {
			if sl, ok := g.slices[k]; ok && r.IntN(2) == 0 {
				upd := sl.DeepCopy()
				upd.Endpoints = append(upd.Endpoints, g.drained[k])
				g.slices[k] = upd
				touchedSlices[k] = true
			}
		}
		clear(g.drained)
	}
	for range n {
		switch op := r.IntN(10); {
		case op == 0 && len(svcNames) > 0:
			k := svcNames[r.IntN(len(svcNames))]
			touchedSvcs[k] = true
			delete(g.svcs, k)
			for _, sk := range paritySortedKeys(g.slices) {
				if sl := g.slices[sk]; sl.Namespace+"/"+sl.Labels[discovery.LabelServiceName] == k && r.IntN(3) != 0 {
					touchedSlices[sk] = true
					delete(g.slices, sk)
				}
			}
		case op <= 3:
			// A new service, or a changed one, under a possibly used name.
			i := r.IntN(len(svcNames) + 4)
			svc := g.service(i)
			g.svcs[parityServiceKey(svc)] = svc
			touchedSvcs[parityServiceKey(svc)] = true
			if r.IntN(2) == 0 {
				sl := g.slice(svc, 0)
				g.slices[paritySliceKey(sl)] = sl
				touchedSlices[paritySliceKey(sl)] = true
			}
		default:
			if len(sliceNames) == 0 {
				continue
			}
			k := sliceNames[r.IntN(len(sliceNames))]
			sl, ok := g.slices[k]
			if !ok {
				continue
			}
			upd := sl.DeepCopy()
			switch {
			case len(upd.Endpoints) > 0 && r.IntN(3) == 0:
				j := r.IntN(len(upd.Endpoints))
				upd.Endpoints = slices.Delete(upd.Endpoints, j, j+1)
			case len(upd.Endpoints) > 0 && r.IntN(2) == 0:
				j := r.IntN(len(upd.Endpoints))
				ready := upd.Endpoints[j].Conditions.Ready == nil || *upd.Endpoints[j].Conditions.Ready
				upd.Endpoints[j].Conditions = discovery.EndpointConditions{Ready: ptr.To(!ready), Serving: ptr.To(!ready), Terminating: ptr.To(ready)}
			default:
				upd.Endpoints = append(upd.Endpoints, g.endpoint())
			}
			g.slices[k] = upd
			touchedSlices[k] = true
		}
	}
	// The step is the net change: each touched object once, present or
	// deleted.
	for _, k := range paritySortedKeys(touchedSvcs) {
		if svc, ok := g.svcs[k]; ok {
			st.Services = append(st.Services, svc)
		} else {
			st.DeleteServices = append(st.DeleteServices, k)
		}
	}
	for _, k := range paritySortedKeys(touchedSlices) {
		if sl, ok := g.slices[k]; ok {
			st.Slices = append(st.Slices, sl)
		} else {
			st.DeleteSlices = append(st.DeleteSlices, k)
		}
	}
	return st
}

func paritySortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func parityJoinHostPort(ip string, port int) string {
	if parityIPFamily(ip) == v1.IPv6Protocol {
		return fmt.Sprintf("[%s]:%d", ip, port)
	}
	return fmt.Sprintf("%s:%d", ip, port)
}

func parityIPFamily(ip string) v1.IPFamily {
	if bytes.ContainsRune([]byte(ip), ':') {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

// parityVariants are the configuration variants, one per scenario number;
// the base configuration (rr, detect-local by cluster CIDR, masquerade bit
// 14) is in scenarios 0 and 1. Variants that change different rules share
// a scenario, to keep testdata small.
var parityVariants = []struct {
	name    string
	changes int
	mutate  func(*parityConfig, parityFamily)
	// prepare, when set, adds initial kernel state from the first step.
	prepare func(*parityGen, *parityScenario)
	// shared makes services share addresses (parityGen.share).
	shared bool
}{
	{"base", 2, func(*parityConfig, parityFamily) {}, nil, false},
	// Ten change steps, compared after the last only.
	{"long", 10, func(*parityConfig, parityFamily) {}, nil, false},
	{"masqall-mh", 0, func(c *parityConfig, _ parityFamily) {
		c.MasqueradeAll = true
		c.Scheduler = "mh"
	}, nil, false},
	{"nodetect-lc-strictarp-npa", 0, func(c *parityConfig, f parityFamily) {
		c.ClusterCIDR = ""
		c.Scheduler = "lc"
		c.StrictARP = true
		c.NodePortAddresses = f.nodePortAddresses
	}, nil, false},
	{"restart", 1, func(c *parityConfig, f parityFamily) {
		c.Scheduler = "wrr"
		c.ExcludeCIDRs = []string{f.excludeCIDR, parityFamilies[parityOtherFamily(f.family)].excludeCIDR}
	}, (*parityGen).restartState, false},
	// Node port addresses that match no node address: upstream then skips
	// each node port service's remaining setup, health check node port
	// included.
	{"shared-npanone", 1, func(c *parityConfig, f parityFamily) {
		c.NodePortAddresses = []string{f.unmatchedCIDR}
	}, nil, true},
}

// restartState makes kernel state as an earlier kube-proxy (of another
// scheduler) might have left it: virtual servers for some current services
// with their real servers at weight 0 or 1 (upstream resets them on its
// first sync) plus a stale real server, with or without connections; a
// virtual server of a deleted service; one inside excludeCIDRs and one of
// the other family (both must stay); current and stale addresses on
// kube-ipvs0; and a stale ipset entry.
func (g *parityGen) restartState(sc *parityScenario) {
	r, f := g.rnd, g.f
	st := &parityInitialState{}
	first := sc.Steps[0]
	for _, svc := range first.Services {
		if svc.Spec.Type == v1.ServiceTypeExternalName || svc.Spec.ClusterIP == v1.ClusterIPNone ||
			parityIPFamily(svc.Spec.ClusterIP) != f.family || r.IntN(3) == 0 {
			continue
		}
		st.Bound = append(st.Bound, svc.Spec.ClusterIP)
		sp := svc.Spec.Ports[0]
		vs := parityInitialVS{Address: svc.Spec.ClusterIP, Port: int(sp.Port), Protocol: string(sp.Protocol), Scheduler: "rr"}
		if r.IntN(3) == 0 {
			vs.Flags, vs.Timeout = 0x1, 10800
		}
		for _, sl := range first.Slices {
			if sl.Labels[discovery.LabelServiceName] != svc.Name {
				continue
			}
			for _, p := range sl.Ports {
				if p.Name == nil || *p.Name != sp.Name {
					continue
				}
				for _, e := range sl.Endpoints {
					vs.RealServers = append(vs.RealServers, parityInitialRS{Address: e.Addresses[0], Port: int(*p.Port), Weight: r.IntN(2)})
				}
			}
		}
		vs.RealServers = append(vs.RealServers, parityInitialRS{Address: f.podIP(5000 + len(st.VirtualServers)), Port: int(sp.TargetPort.IntVal), Weight: 1, ActiveConn: r.IntN(2) * 4})
		st.VirtualServers = append(st.VirtualServers, vs)
	}
	other := parityFamilies[parityOtherFamily(f.family)]
	st.VirtualServers = append(st.VirtualServers,
		parityInitialVS{Address: f.clusterIP(900), Port: 80, Protocol: "TCP", Scheduler: "rr",
			RealServers: []parityInitialRS{{Address: f.podIP(6000), Port: 8080, Weight: 1, ActiveConn: 2}}},
		parityInitialVS{Address: f.excludedIP, Port: 443, Protocol: "TCP", Scheduler: "rr",
			RealServers: []parityInitialRS{{Address: f.podIP(6001), Port: 8443, Weight: 1}}},
		parityInitialVS{Address: other.clusterIP(901), Port: 53, Protocol: "UDP", Scheduler: "rr"},
	)
	st.Bound = append(st.Bound, f.clusterIP(900), f.excludedIP, other.clusterIP(901))
	family, prefix := "inet", "KUBE-"
	if f.family == v1.IPv6Protocol {
		family, prefix = "inet6", "KUBE-6-"
	}
	st.IPSets = []parityInitialSet{{Name: prefix + "CLUSTER-IP", Type: "hash:ip,port", Family: family,
		Entries: []string{f.clusterIP(900) + ",tcp:80", first.Services[0].Spec.ClusterIP + ",tcp:1"}}}
	sc.InitialState = st

	// A service whose external IP and port are those of the excluded
	// virtual server: the proxier takes it over, and since it is excluded
	// from cleanup it stays when the service goes (see restartFinish).
	excl := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "excluded"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: f.clusterIP(950), ClusterIPs: []string{f.clusterIP(950)},
			ExternalIPs: []string{f.excludedIP},
			Ports:       []v1.ServicePort{{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(8443)}}},
	}
	at := discovery.AddressTypeIPv4
	if f.family == v1.IPv6Protocol {
		at = discovery.AddressTypeIPv6
	}
	exclSlice := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "excluded-0", Labels: map[string]string{discovery.LabelServiceName: "excluded"}},
		AddressType: at,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("https"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8443)}},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{f.podIP(6100)}, NodeName: ptr.To("node2")},
			{Addresses: []string{f.podIP(6101)}, NodeName: ptr.To(parityNodeName)},
		},
	}
	sc.Steps[0].Services = append(sc.Steps[0].Services, excl)
	sc.Steps[0].Slices = append(sc.Steps[0].Slices, exclSlice)
	g.svcs[parityServiceKey(excl)] = excl
	g.slices[paritySliceKey(exclSlice)] = exclSlice
}

// restartFinish deletes restartState's excluded service in the last step.
func (g *parityGen) restartFinish(sc *parityScenario) {
	last := &sc.Steps[len(sc.Steps)-1]
	last.Services = slices.DeleteFunc(last.Services, func(s *v1.Service) bool { return s.Name == "excluded" })
	last.Slices = slices.DeleteFunc(last.Slices, func(s *discovery.EndpointSlice) bool { return s.Name == "excluded-0" })
	last.DeleteServices = append(last.DeleteServices, "ns/excluded")
	last.DeleteSlices = append(last.DeleteSlices, "ns/excluded-0")
	delete(g.svcs, "ns/excluded")
	delete(g.slices, "ns/excluded-0")
}

// generateParityScenarios returns the scenarios, the same on every call.
func generateParityScenarios() []*parityScenario {
	var out []*parityScenario
	for fi, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		f := parityFamilies[family]
		for n, variant := range parityVariants {
			g := &parityGen{f: f, rnd: rand.New(rand.NewPCG(uint64(1600+n), uint64(fi))),
				svcs: map[string]*v1.Service{}, slices: map[string]*discovery.EndpointSlice{}, drained: map[string]discovery.Endpoint{},
				shared: variant.shared, hints: n == 0}
			sc := &parityScenario{
				Name:     fmt.Sprintf("%s-%d-%s", map[v1.IPFamily]string{v1.IPv4Protocol: "ipv4", v1.IPv6Protocol: "ipv6"}[family], n, variant.name),
				Family:   family,
				NodeName: parityNodeName, NodeIP: f.nodeIP, Interfaces: f.interfaces,
				Config: parityConfig{ClusterCIDR: f.clusterCIDR, MasqueradeBit: 14},
			}
			if g.hints {
				sc.NodeLabels = map[string]string{v1.LabelTopologyZone: "zone-a"}
			}
			variant.mutate(&sc.Config, f)
			sc.Steps = append(sc.Steps, g.initial(8+g.rnd.IntN(3)))
			if variant.prepare != nil {
				variant.prepare(g, sc)
			}
			for c := range variant.changes {
				sc.Steps = append(sc.Steps, g.change(3+g.rnd.IntN(4), c%2 == 0))
			}
			if variant.name == "restart" {
				g.restartFinish(sc)
			}
			if variant.changes > 2 {
				for k := range len(sc.Steps) - 1 {
					sc.Steps[k].NoCapture = true
				}
			}
			out = append(out, sc)
		}
	}
	out = append(out, generateDualStackScenario())
	return out
}

// generateDualStackScenario makes an IPv4 cluster with base configuration
// and one change step, then makes two services in three dual-stack (with
// IPv6 cluster, external and load balancer IPs and source ranges, and an
// IPv6 twin of each of their slices).
func generateDualStackScenario() *parityScenario {
	f4, f6 := parityFamilies[v1.IPv4Protocol], parityFamilies[v1.IPv6Protocol]
	g := &parityGen{f: f4, rnd: rand.New(rand.NewPCG(1700, 2)),
		svcs: map[string]*v1.Service{}, slices: map[string]*discovery.EndpointSlice{}, drained: map[string]discovery.Endpoint{}}
	sc := &parityScenario{
		Name: "dual-0-base", Family: v1.IPv4Protocol, DualStack: true,
		NodeName: parityNodeName, NodeIP: f4.nodeIP, NodeIP6: f6.nodeIP,
		Interfaces: map[string][]string{
			"eth0": {"192.168.0.2/24", "192.168.1.2/24", "fd00:192::2/64", "fd00:193::2/64", "fe80::2/64"},
			"lo":   {"127.0.0.1/8", "::1/128"},
		},
		Config: parityConfig{ClusterCIDR: f4.clusterCIDR, ClusterCIDR6: f6.clusterCIDR, MasqueradeBit: 14},
	}
	steps := []parityStep{g.initial(8 + g.rnd.IntN(3))}
	for c := range 1 {
		steps = append(steps, g.change(3+g.rnd.IntN(4), c%2 == 0))
	}
	for _, st := range steps {
		sc.Steps = append(sc.Steps, parityDualize(st))
	}
	return sc
}

// parityServiceIndex is i of a generated service's name "svc<i>".
func parityServiceIndex(name string) int {
	var i int
	fmt.Sscanf(name, "svc%d", &i)
	return i
}

// parityDualStackService says whether the generated IPv4 service of this
// name is made dual-stack (two in three, by name, so a service keeps its
// families through changes).
func parityDualStackService(name string) bool { return parityServiceIndex(name)%3 != 2 }

// parityDualize adds the IPv6 half of a dual-stack cluster to a step of an
// IPv4 one.
func parityDualize(st parityStep) parityStep {
	f6 := parityFamilies[v1.IPv6Protocol]
	out := parityStep{DeleteServices: st.DeleteServices, ActiveConns: st.ActiveConns}
	has6 := map[string]bool{}
	for _, svc := range st.Services {
		svc = svc.DeepCopy()
		i := parityServiceIndex(svc.Name)
		switch {
		case parityIPFamily(svc.Spec.ClusterIP) == v1.IPv6Protocol && svc.Spec.ClusterIP != "":
			has6[svc.Name] = true
		case svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != v1.ClusterIPNone && parityDualStackService(svc.Name):
			has6[svc.Name] = true
			svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, f6.clusterIP(i))
			svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
			svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
			if len(svc.Spec.ExternalIPs) > 0 {
				svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, f6.extIP(i))
			}
			if len(svc.Status.LoadBalancer.Ingress) > 0 {
				svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: f6.lbIP(i)})
			}
			if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
				svc.Spec.LoadBalancerSourceRanges = append(svc.Spec.LoadBalancerSourceRanges, f6.rangeOffNode)
				if i%2 == 0 {
					svc.Spec.LoadBalancerSourceRanges = append(svc.Spec.LoadBalancerSourceRanges, f6.rangeWithNode)
				}
			}
		}
		out.Services = append(out.Services, svc)
	}
	for _, sl := range st.Slices {
		out.Slices = append(out.Slices, sl)
		svcName := sl.Labels[discovery.LabelServiceName]
		if !has6[svcName] && !parityDualStackService(svcName) {
			continue
		}
		twin := sl.DeepCopy()
		twin.Name += "-v6"
		twin.AddressType = discovery.AddressTypeIPv6
		for k := range twin.Endpoints {
			var a, b, c int
			fmt.Sscanf(twin.Endpoints[k].Addresses[0], "10.%d.%d.%d", &a, &b, &c)
			twin.Endpoints[k].Addresses = []string{f6.podIP(b*250 + c - 1)}
		}
		out.Slices = append(out.Slices, twin)
	}
	for _, k := range st.DeleteSlices {
		out.DeleteSlices = append(out.DeleteSlices, k)
		ns, name, _ := strings.Cut(k, "/")
		svcName := name[:strings.LastIndex(name, "-")]
		if parityDualStackService(svcName) {
			out.DeleteSlices = append(out.DeleteSlices, ns+"/"+name+"-v6")
		}
	}
	return out
}

// marshalParityScenario writes one JSON object per line within the step
// lists, so that diffs of regenerated files stay readable.
func marshalParityScenario(sc *parityScenario) ([]byte, error) {
	var b bytes.Buffer
	head := *sc
	head.Steps = nil
	h, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	// Reopen the head object to append the steps one object per line.
	b.Write(h[:len(h)-1])
	b.WriteString(`,"steps":[` + "\n")
	for si, st := range sc.Steps {
		if si > 0 {
			b.WriteString(",\n")
		}
		b.WriteString("{")
		first := true
		field := func(name string, items []any) error {
			if len(items) == 0 {
				return nil
			}
			if !first {
				b.WriteString(",")
			}
			first = false
			fmt.Fprintf(&b, "%q:[\n", name)
			for i, it := range items {
				j, err := json.Marshal(it)
				if err != nil {
					return fmt.Errorf("step %d %s[%d]: %w", si, name, i, err)
				}
				if i > 0 {
					b.WriteString(",\n")
				}
				b.Write(j)
			}
			b.WriteString("]")
			return nil
		}
		for _, fl := range []struct {
			name  string
			items []any
		}{
			{"services", parityAnySlice(st.Services)},
			{"slices", parityAnySlice(st.Slices)},
			{"deleteServices", parityAnySlice(st.DeleteServices)},
			{"deleteSlices", parityAnySlice(st.DeleteSlices)},
			{"activeConns", parityAnySlice(st.ActiveConns)},
		} {
			if err := field(fl.name, fl.items); err != nil {
				return nil, err
			}
		}
		if st.NoCapture {
			if !first {
				b.WriteString(",")
			}
			b.WriteString(`"noCapture":true`)
		}
		b.WriteString("}")
	}
	b.WriteString("]}\n")
	// Check that it parses back to the same scenario.
	var back parityScenario
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		return nil, fmt.Errorf("scenario %s does not parse back: %w", sc.Name, err)
	}
	if x, y := parityMustJSON(sc), parityMustJSON(&back); !bytes.Equal(x, y) {
		return nil, fmt.Errorf("scenario %s does not read back as written", sc.Name)
	}
	return b.Bytes(), nil
}

func parityAnySlice[T any](s []T) []any {
	out := make([]any, len(s))
	for i := range s {
		out[i] = s[i]
	}
	return out
}

// TestParityScenariosUpToDate checks that the checked-in scenarios are the
// generator's output (so upstream's captures belong to what the generator
// makes), and rewrites them with -update-parity-clusters.
func TestParityScenariosUpToDate(t *testing.T) {
	scenarios := generateParityScenarios()
	for _, sc := range scenarios {
		got, err := marshalParityScenario(sc)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(parityDir, sc.Name+".json")
		if *parityUpdateClusters {
			if err := os.MkdirAll(parityDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("reading %s (run with -update-parity-clusters and recapture upstream): %v", file, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the generator makes now; run with -update-parity-clusters and recapture upstream (UPSTREAM-CAPTURE.md)", file)
		}
	}
	files, err := filepath.Glob(filepath.Join(parityDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(scenarios) {
		t.Errorf("%s holds %d scenarios, the generator makes %d", parityDir, len(files), len(scenarios))
	}
}

func parityMustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
