//go:build linux

package proxy_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var writeParityScenarios = flag.Bool("write-parity-scenarios", false,
	"regenerate testdata/upstream-parity/scenarios.json.gz (then recapture upstream.json.gz, see the README there)")

const (
	parityDir       = "testdata/upstream-parity"
	parityScenarios = 150
	paritySeed      = 1337
)

// TestUpstreamParity replays randomly generated, API-valid clusters through
// the change trackers, the maps and CategorizeEndpoints, and compares every
// observation with what upstream Kubernetes v1.37.2's pkg/proxy produced for
// the same input (captured once, see testdata/upstream-parity/README.md).
func TestUpstreamParity(t *testing.T) {
	scenariosFile := filepath.Join(parityDir, "scenarios.json.gz")
	if *writeParityScenarios {
		writeGzipJSON(t, scenariosFile, genParityScenarios(rand.New(rand.NewPCG(paritySeed, 0)), parityScenarios))
	}
	var scenarios []parityScenario
	readGzipJSON(t, scenariosFile, &scenarios)
	var want [][]parityResult
	readGzipJSON(t, filepath.Join(parityDir, "upstream.json.gz"), &want)
	if len(want) != len(scenarios) {
		t.Fatalf("upstream.json.gz has %d scenarios, scenarios.json.gz %d: recapture upstream.json.gz", len(want), len(scenarios))
	}
	for i, sc := range scenarios {
		got := runParityScenario(sc)
		// Compare through JSON so that both sides are seen exactly as stored.
		data, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		var gotDecoded []parityResult
		if err := json.Unmarshal(data, &gotDecoded); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want[i], gotDecoded); diff != "" {
			t.Errorf("scenario %d (%s, node %s, labels %v) differs from upstream (-upstream +ours):\n%s", i, sc.Family, sc.NodeName, sc.Labels, diff)
		}
	}
}

// The capture files are gzipped JSON: as plain JSON they would be
// megabytes, mostly repeated empty fields.
func readGzipJSON(t *testing.T, path string, into any) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := json.NewDecoder(zr).Decode(into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func writeGzipJSON(t *testing.T, path string, v any) {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err := json.NewEncoder(zw).Encode(v); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// parityGen builds API-valid objects only: for invalid ones this package
// deliberately differs from upstream (it skips what upstream would program
// or crash on).
type parityGen struct {
	r        *rand.Rand
	family   v1.IPFamily
	nodeName string
	nextIP   int
	blocks   map[string]int
}

func genParityScenarios(r *rand.Rand, n int) []parityScenario {
	var out []parityScenario
	for i := range n {
		g := &parityGen{r: r, family: v1.IPv4Protocol, nodeName: "node-a"}
		if i%3 == 2 {
			g.family = v1.IPv6Protocol
		}
		sc := parityScenario{Family: g.family, NodeName: g.nodeName}
		switch r.IntN(4) {
		case 0:
			sc.Labels = nil
		case 1:
			sc.Labels = map[string]string{v1.LabelTopologyZone: "zone-a"}
		case 2:
			sc.Labels = map[string]string{v1.LabelTopologyZone: "zone-b", "other": "x"}
		case 3:
			sc.Labels = map[string]string{v1.LabelTopologyZone: ""}
		}
		var services []*v1.Service
		var slices []*discovery.EndpointSlice
		nsvc := 1 + r.IntN(6)
		for j := range nsvc {
			services = append(services, g.service("ns", fmt.Sprintf("svc-%d", j)))
		}
		for _, s := range services {
			slices = append(slices, g.slicesFor(s, "")...)
		}
		if r.IntN(4) == 0 {
			slices = append(slices, g.slicesFor(g.service("ns", "orphan"), "")...)
		}
		for range 2 + r.IntN(3) {
			sc.Rounds = append(sc.Rounds, parityRound{Services: services, Slices: slices, Flows: g.flows(services, slices)})
			services, slices = g.mutate(services, slices)
		}
		out = append(out, sc)
	}
	return out
}

func (g *parityGen) pick(n int) int { return g.r.IntN(n) }

func (g *parityGen) ip(fam v1.IPFamily, prefix4, prefix6 string) string {
	g.nextIP++
	if fam == v1.IPv6Protocol {
		return fmt.Sprintf("%s%x", prefix6, g.nextIP)
	}
	return fmt.Sprintf("%s%d.%d", prefix4, g.nextIP/250, 1+g.nextIP%250)
}

func (g *parityGen) anyFamily() v1.IPFamily {
	if g.pick(3) == 0 {
		if g.family == v1.IPv4Protocol {
			return v1.IPv6Protocol
		}
		return v1.IPv4Protocol
	}
	return g.family
}

func (g *parityGen) service(ns, name string) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	types := []v1.ServiceType{v1.ServiceTypeClusterIP, v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer, v1.ServiceTypeLoadBalancer, v1.ServiceTypeExternalName}
	s.Spec.Type = types[g.pick(len(types))]

	// Families: ours only, the other only, or dual stack either way round.
	other := v1.IPv6Protocol
	if g.family == v1.IPv6Protocol {
		other = v1.IPv4Protocol
	}
	var fams []v1.IPFamily
	switch g.pick(5) {
	case 0, 1:
		fams = []v1.IPFamily{g.family}
	case 2:
		fams = []v1.IPFamily{other}
	case 3:
		fams = []v1.IPFamily{g.family, other}
	case 4:
		fams = []v1.IPFamily{other, g.family}
	}
	if s.Spec.Type != v1.ServiceTypeExternalName {
		s.Spec.IPFamilies = fams
		headless := s.Spec.Type == v1.ServiceTypeClusterIP && g.pick(6) == 0
		for _, f := range fams {
			if headless {
				s.Spec.ClusterIPs = []string{v1.ClusterIPNone}
				break
			}
			s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, g.ip(f, "10.96.", "fd00:96::"))
		}
		s.Spec.ClusterIP = s.Spec.ClusterIPs[0]
	} else {
		s.Spec.ExternalName = "example.com"
	}

	protos := []v1.Protocol{v1.ProtocolTCP, v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}
	nports := 1 + g.pick(3)
	for i := range nports {
		p := v1.ServicePort{Name: fmt.Sprintf("p%d", i), Protocol: protos[g.pick(len(protos))], Port: int32(80 + i)}
		if nports == 1 && g.pick(2) == 0 {
			p.Name = ""
		}
		if s.Spec.Type == v1.ServiceTypeNodePort || (s.Spec.Type == v1.ServiceTypeLoadBalancer && g.pick(5) != 0) {
			p.NodePort = int32(30000 + g.pick(2000))
		}
		s.Spec.Ports = append(s.Spec.Ports, p)
	}

	if s.Spec.Type != v1.ServiceTypeExternalName && g.pick(3) == 0 {
		for range 1 + g.pick(2) {
			s.Spec.ExternalIPs = append(s.Spec.ExternalIPs, g.ip(g.anyFamily(), "192.168.", "2001:db8:e::"))
		}
	}
	if s.Spec.Type == v1.ServiceTypeLoadBalancer {
		for range g.pick(3) {
			ing := v1.LoadBalancerIngress{IP: g.ip(g.anyFamily(), "203.0.", "2001:db8:1b::")}
			switch g.pick(4) {
			case 0:
				ing.IPMode = ptr.To(v1.LoadBalancerIPModeProxy)
			case 1:
				ing.IPMode = ptr.To(v1.LoadBalancerIPModeVIP)
			}
			if g.pick(6) == 0 {
				ing = v1.LoadBalancerIngress{Hostname: "lb.example.com"}
			}
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, ing)
		}
		ranges := []string{"10.0.0.0/8", " 172.16.0.0/12 ", "0.0.0.0/0", "fd00::/8", "::/0", "2001:db8::/32"}
		for range g.pick(3) {
			s.Spec.LoadBalancerSourceRanges = append(s.Spec.LoadBalancerSourceRanges, ranges[g.pick(len(ranges))])
		}
	}
	externallyAccessible := s.Spec.Type == v1.ServiceTypeNodePort || s.Spec.Type == v1.ServiceTypeLoadBalancer ||
		(s.Spec.Type == v1.ServiceTypeClusterIP && len(s.Spec.ExternalIPs) > 0)
	if externallyAccessible {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
		if g.pick(2) == 0 {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			if s.Spec.Type == v1.ServiceTypeLoadBalancer {
				s.Spec.HealthCheckNodePort = int32(32000 + g.pick(500))
			}
		}
	}
	if s.Spec.Type != v1.ServiceTypeExternalName {
		switch g.pick(3) {
		case 0:
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		case 1:
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyCluster)
		}
	}
	s.Spec.SessionAffinity = v1.ServiceAffinityNone
	if g.pick(3) == 0 {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(1 + g.pick(86400)))}}
	}
	return s
}

// endpointPool returns the addresses a slice may use. Each slice gets its
// own block: when one endpoint appears in two slices of a service, upstream
// keeps whichever copy its map iteration reaches last, so such input has no
// single upstream answer to compare with. (Duplicates within one slice are
// deterministic and stay in.)
func (g *parityGen) endpointPool(sl *discovery.EndpointSlice) []string {
	key := sl.Namespace + "/" + sl.Name
	if g.blocks == nil {
		g.blocks = map[string]int{}
	}
	b, ok := g.blocks[key]
	if !ok {
		b = len(g.blocks) + 1
		g.blocks[key] = b
	}
	var pool []string
	for k := 1; k <= 4; k++ {
		if sl.AddressType == discovery.AddressTypeIPv6 {
			pool = append(pool, fmt.Sprintf("fd00:%x::%x", b, k))
		} else {
			pool = append(pool, fmt.Sprintf("10.%d.%d.%d", 100+b/200, b%200, k))
		}
	}
	return pool
}

func (g *parityGen) optBool() *bool {
	switch g.pick(4) {
	case 0:
		return nil
	case 1:
		return ptr.To(false)
	}
	return ptr.To(true)
}

func (g *parityGen) slicesFor(s *v1.Service, suffix string) []*discovery.EndpointSlice {
	var out []*discovery.EndpointSlice
	for i := range g.pick(4) {
		fam := g.anyFamily()
		sl := &discovery.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: fmt.Sprintf("%s-%d%s", s.Name, i, suffix),
				Labels: map[string]string{discovery.LabelServiceName: s.Name}},
			AddressType: discovery.AddressType(fam),
		}
		g.fillSlice(sl, s)
		out = append(out, sl)
	}
	return out
}

func (g *parityGen) fillSlice(sl *discovery.EndpointSlice, s *v1.Service) {
	sl.Endpoints, sl.Ports = nil, nil
	pool := g.endpointPool(sl)
	zones := []string{"zone-a", "zone-b", "zone-c"}
	nodes := []string{"node-a", "node-b", "node-c"}
	// Node hints only appear together with zone hints, as the EndpointSlice
	// controller writes them; a few slices still get partial hints.
	hinted := g.pick(3) != 0
	nodeHinted := g.pick(2) == 0
	for range g.pick(5) {
		ep := discovery.Endpoint{Addresses: []string{pool[g.pick(len(pool))]}}
		ep.Conditions = discovery.EndpointConditions{Ready: g.optBool(), Serving: g.optBool(), Terminating: g.optBool()}
		switch g.pick(3) {
		case 0:
			ep.NodeName = ptr.To(g.nodeName)
		case 1:
			ep.NodeName = ptr.To(nodes[1+g.pick(2)])
		}
		if hinted && g.pick(8) != 0 {
			ep.Hints = &discovery.EndpointHints{}
			for range 1 + g.pick(2) {
				ep.Hints.ForZones = append(ep.Hints.ForZones, discovery.ForZone{Name: zones[g.pick(len(zones))]})
			}
			if nodeHinted {
				ep.Hints.ForNodes = append(ep.Hints.ForNodes, discovery.ForNode{Name: nodes[g.pick(len(nodes))]})
			}
		}
		sl.Endpoints = append(sl.Endpoints, ep)
	}
	for _, p := range s.Spec.Ports {
		if g.pick(5) == 0 {
			continue
		}
		sl.Ports = append(sl.Ports, discovery.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To(int32(8000 + g.pick(3)))})
	}
	if g.pick(8) == 0 {
		sl.Ports = append(sl.Ports, discovery.EndpointPort{Name: ptr.To("unknown"), Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To[int32](9999)})
	}
}

// mutate derives the next round: some services change or go away, new ones
// appear, some slices change, move endpoints or go away.
func (g *parityGen) mutate(services []*v1.Service, slices []*discovery.EndpointSlice) ([]*v1.Service, []*discovery.EndpointSlice) {
	var nextSvcs []*v1.Service
	byName := map[string]*v1.Service{}
	for _, s := range services {
		switch g.pick(10) {
		case 0:
			continue // deleted
		case 1, 2:
			s = g.service(s.Namespace, s.Name)
		}
		nextSvcs = append(nextSvcs, s)
		byName[s.Name] = s
	}
	if g.pick(3) == 0 {
		s := g.service("ns", fmt.Sprintf("new-%d", g.nextIP))
		nextSvcs = append(nextSvcs, s)
		byName[s.Name] = s
	}
	var nextSlices []*discovery.EndpointSlice
	for _, sl := range slices {
		svcName := sl.Labels[discovery.LabelServiceName]
		switch g.pick(8) {
		case 0:
			continue // deleted
		case 1, 2:
			owner := byName[svcName]
			if owner == nil {
				owner = g.service(sl.Namespace, svcName)
			}
			sl = sl.DeepCopy()
			g.fillSlice(sl, owner)
		}
		nextSlices = append(nextSlices, sl)
	}
	for _, s := range nextSvcs {
		if g.pick(4) == 0 {
			nextSlices = append(nextSlices, g.slicesFor(s, fmt.Sprintf("-r%d", g.nextIP))...)
		}
	}
	return nextSvcs, nextSlices
}

// flows builds a conntrack table for the round: UDP (and some TCP) flows to
// every frontend and node port of the round's services, answered by the
// services' endpoints on their ports, by addresses that are no endpoint, or
// from the wrong port. Service ports (80-82) and node ports (30000+) never
// coincide: upstream also re-checks a frontend flow against a node port of
// the same number, which this package deliberately does not.
func (g *parityGen) flows(services []*v1.Service, slices []*discovery.EndpointSlice) []parityFlow {
	var out []parityFlow
	wantV6 := g.family == v1.IPv6Protocol
	is6 := func(ip string) bool { return strings.Contains(ip, ":") }
	nodeIP := "192.0.2.10"
	if wantV6 {
		nodeIP = "2001:db8:a::10"
	}
	for _, s := range services {
		var backends []string
		var ports []uint16
		for _, sl := range slices {
			if sl.Labels[discovery.LabelServiceName] != s.Name {
				continue
			}
			for _, ep := range sl.Endpoints {
				backends = append(backends, ep.Addresses[0])
			}
			for _, p := range sl.Ports {
				ports = append(ports, uint16(*p.Port))
			}
		}
		backends = append(backends, g.ip(g.family, "10.250.", "fd00:250::")) // never an endpoint
		ports = append(ports, 7777)
		frontends := append([]string{}, s.Spec.ClusterIPs...)
		frontends = append(frontends, s.Spec.ExternalIPs...)
		for _, ing := range s.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				frontends = append(frontends, ing.IP)
			}
		}
		for _, sp := range s.Spec.Ports {
			proto := uint8(17) // UDP
			if sp.Protocol == v1.ProtocolTCP && g.pick(4) != 0 {
				continue
			}
			if sp.Protocol != v1.ProtocolUDP {
				proto = 6
			}
			for _, fe := range frontends {
				if fe == v1.ClusterIPNone || is6(fe) != wantV6 {
					continue
				}
				for range 1 + g.pick(3) {
					be := backends[g.pick(len(backends))]
					if is6(be) != wantV6 {
						continue
					}
					out = append(out, parityFlow{Proto: proto, Dst: fe, DPort: uint16(sp.Port), ReplySrc: be, RPort: ports[g.pick(len(ports))]})
				}
			}
			if sp.NodePort != 0 {
				for range 1 + g.pick(2) {
					be := backends[g.pick(len(backends))]
					if is6(be) != wantV6 {
						continue
					}
					out = append(out, parityFlow{Proto: proto, Dst: nodeIP, DPort: uint16(sp.NodePort), ReplySrc: be, RPort: ports[g.pick(len(ports))]})
				}
			}
		}
	}
	return out
}
