//go:build linux

package proxy_test

// This file is shared verbatim (apart from the package clause and the proxy
// import) with the upstream capture program described in
// testdata/upstream-parity/README.md, so that both implementations are driven
// and observed by the same code.

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
)

// parityScenario is one node's view of a changing cluster: each round is
// the full desired set of Services and EndpointSlices; the differences to
// the previous round are fed to the change trackers, then both maps are
// updated and observed.
type parityScenario struct {
	Family   v1.IPFamily       `json:"family"`
	NodeName string            `json:"nodeName"`
	Labels   map[string]string `json:"labels"`
	Rounds   []parityRound     `json:"rounds"`
}

type parityRound struct {
	Services []*v1.Service              `json:"services"`
	Slices   []*discovery.EndpointSlice `json:"slices"`
	// Flows is the conntrack table CleanStaleEntries sees after the round.
	Flows []parityFlow `json:"flows,omitempty"`
}

// parityFlow is a conntrack entry: original destination and reply source
// are what stale-flow cleanup looks at.
type parityFlow struct {
	Proto    uint8  `json:"proto"`
	Dst      string `json:"dst"`
	DPort    uint16 `json:"dport"`
	ReplySrc string `json:"replySrc"`
	RPort    uint16 `json:"rport"`
}

func (f parityFlow) String() string {
	return fmt.Sprintf("%d %s reply %s", f.Proto, net.JoinHostPort(f.Dst, fmt.Sprint(f.DPort)), net.JoinHostPort(f.ReplySrc, fmt.Sprint(f.RPort)))
}

func (f parityFlow) netlink() *netlink.ConntrackFlow {
	client := net.ParseIP("192.0.2.99")
	if strings.Contains(f.Dst, ":") {
		client = net.ParseIP("2001:db8:c::99")
	}
	return &netlink.ConntrackFlow{
		Forward: netlink.IPTuple{SrcIP: client, SrcPort: 40000, DstIP: net.ParseIP(f.Dst), DstPort: f.DPort, Protocol: f.Proto},
		Reverse: netlink.IPTuple{SrcIP: net.ParseIP(f.ReplySrc), SrcPort: f.RPort, DstIP: client, DstPort: 40000, Protocol: f.Proto},
	}
}

// parityConntrack is a conntrack table that records what is deleted.
type parityConntrack struct {
	flows   []*netlink.ConntrackFlow
	deleted []*netlink.ConntrackFlow
}

var _ conntrack.Interface = &parityConntrack{}

func (c *parityConntrack) ListEntries(uint8) ([]*netlink.ConntrackFlow, error) { return c.flows, nil }

func (c *parityConntrack) DeleteEntries(_ uint8, flows []*netlink.ConntrackFlow) (int, error) {
	c.deleted = append(c.deleted, flows...)
	return len(flows), nil
}

type paritySvcView struct {
	String        string   `json:"string"`
	ClusterIP     string   `json:"clusterIP"`
	Port          int      `json:"port"`
	Protocol      string   `json:"protocol"`
	NodePort      int      `json:"nodePort"`
	HCNodePort    int      `json:"hcNodePort"`
	ExternalIPs   []string `json:"externalIPs"`
	LBVIPs        []string `json:"lbVIPs"`
	SourceRanges  []string `json:"sourceRanges"`
	Affinity      string   `json:"affinity"`
	Sticky        int      `json:"sticky"`
	ExtLocal      bool     `json:"extLocal"`
	IntLocal      bool     `json:"intLocal"`
	ExtAccessible bool     `json:"extAccessible"`
	UsesCluster   bool     `json:"usesCluster"`
	UsesLocal     bool     `json:"usesLocal"`
}

type parityCategorized struct {
	Cluster []string `json:"cluster"`
	Local   []string `json:"local"`
	All     []string `json:"all"`
	HasAny  bool     `json:"hasAny"`
}

type parityResult struct {
	ServiceUpdateReturns []bool                       `json:"serviceUpdateReturns"`
	SliceUpdateReturns   []bool                       `json:"sliceUpdateReturns"`
	UpdatedServices      []string                     `json:"updatedServices"`
	Services             map[string]paritySvcView     `json:"services"`
	UpdatedEndpoints     []string                     `json:"updatedEndpoints"`
	ConntrackCleanup     bool                         `json:"conntrackCleanup"`
	Endpoints            map[string][]string          `json:"endpoints"`
	HealthCheckNodePorts map[string]uint16            `json:"healthCheckNodePorts"`
	LocalReadyEndpoints  map[string]int               `json:"localReadyEndpoints"`
	Categorized          map[string]parityCategorized `json:"categorized"`
	ConntrackDeleted     []string                     `json:"conntrackDeleted"`
}

func parityKey(spn proxy.ServicePortName) string {
	return spn.String() + "/" + string(spn.Protocol)
}

func parityStrings[T fmt.Stringer](in []T) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, 0, len(in))
	for _, x := range in {
		out = append(out, x.String())
	}
	sort.Strings(out)
	return out
}

// parityEndpoints keeps nil and empty apart: proxiers treat them alike, but
// the difference is part of the observable result.
func parityEndpoints(in []proxy.Endpoint) []string {
	if in == nil {
		return nil
	}
	out := make([]string, 0, len(in))
	for _, ep := range in {
		out = append(out, ep.String())
	}
	sort.Strings(out)
	return out
}

func parityEndpointView(ep proxy.Endpoint) string {
	zones := ep.ZoneHints().UnsortedList()
	nodes := ep.NodeHints().UnsortedList()
	sort.Strings(zones)
	sort.Strings(nodes)
	return fmt.Sprintf("%s ip=%s port=%d local=%v ready=%v serving=%v terminating=%v zones=%s nodes=%s",
		ep.String(), ep.IP(), ep.Port(), ep.IsLocal(), ep.IsReady(), ep.IsServing(), ep.IsTerminating(),
		strings.Join(zones, ","), strings.Join(nodes, ","))
}

func runParityScenario(sc parityScenario) []parityResult {
	sct := proxy.NewServiceChangeTracker(sc.Family, nil, nil)
	ect := proxy.NewEndpointsChangeTracker(sc.Family, sc.NodeName, nil, nil)
	svcMap := proxy.ServicePortMap{}
	epMap := proxy.EndpointsMap{}
	prevSvcs := map[string]*v1.Service{}
	prevSlices := map[string]*discovery.EndpointSlice{}

	var results []parityResult
	for _, round := range sc.Rounds {
		var res parityResult

		curSvcs := map[string]*v1.Service{}
		for _, s := range round.Services {
			key := s.Namespace + "/" + s.Name
			curSvcs[key] = s
			res.ServiceUpdateReturns = append(res.ServiceUpdateReturns, sct.Update(prevSvcs[key], s))
		}
		for _, key := range sortedKeys(prevSvcs) {
			if _, ok := curSvcs[key]; !ok {
				res.ServiceUpdateReturns = append(res.ServiceUpdateReturns, sct.Update(prevSvcs[key], nil))
			}
		}
		prevSvcs = curSvcs

		curSlices := map[string]*discovery.EndpointSlice{}
		for _, s := range round.Slices {
			key := s.Namespace + "/" + s.Name
			curSlices[key] = s
			res.SliceUpdateReturns = append(res.SliceUpdateReturns, ect.EndpointSliceUpdate(s, false))
		}
		for _, key := range sortedKeys(prevSlices) {
			if _, ok := curSlices[key]; !ok {
				res.SliceUpdateReturns = append(res.SliceUpdateReturns, ect.EndpointSliceUpdate(prevSlices[key], true))
			}
		}
		prevSlices = curSlices

		sres := svcMap.Update(sct)
		eres := epMap.Update(ect)
		for nn := range sres.UpdatedServices {
			res.UpdatedServices = append(res.UpdatedServices, nn.String())
		}
		sort.Strings(res.UpdatedServices)
		for nn := range eres.UpdatedServices {
			res.UpdatedEndpoints = append(res.UpdatedEndpoints, nn.String())
		}
		sort.Strings(res.UpdatedEndpoints)
		res.ConntrackCleanup = eres.ConntrackCleanupRequired

		res.Services = map[string]paritySvcView{}
		res.Categorized = map[string]parityCategorized{}
		for spn, sp := range svcMap {
			var ranges []string
			for _, c := range sp.LoadBalancerSourceRanges() {
				ranges = append(ranges, c.String())
			}
			sort.Strings(ranges)
			res.Services[parityKey(spn)] = paritySvcView{
				String: sp.String(), ClusterIP: sp.ClusterIP().String(), Port: sp.Port(), Protocol: string(sp.Protocol()),
				NodePort: sp.NodePort(), HCNodePort: sp.HealthCheckNodePort(),
				ExternalIPs: parityStrings(sp.ExternalIPs()), LBVIPs: parityStrings(sp.LoadBalancerVIPs()), SourceRanges: ranges,
				Affinity: string(sp.SessionAffinityType()), Sticky: sp.StickyMaxAgeSeconds(),
				ExtLocal: sp.ExternalPolicyLocal(), IntLocal: sp.InternalPolicyLocal(), ExtAccessible: sp.ExternallyAccessible(),
				UsesCluster: sp.UsesClusterEndpoints(), UsesLocal: sp.UsesLocalEndpoints(),
			}
			cluster, local, all, hasAny := proxy.CategorizeEndpoints(epMap[spn], sp, sc.NodeName, sc.Labels)
			res.Categorized[parityKey(spn)] = parityCategorized{
				Cluster: parityEndpoints(cluster), Local: parityEndpoints(local), All: parityEndpoints(all), HasAny: hasAny,
			}
		}
		res.Endpoints = map[string][]string{}
		for spn, eps := range epMap {
			var views []string
			for _, ep := range eps {
				views = append(views, parityEndpointView(ep))
			}
			// The map's lists are sorted by String(); keep that order, it is
			// part of the contract.
			res.Endpoints[parityKey(spn)] = views
		}
		res.HealthCheckNodePorts = map[string]uint16{}
		for nn, p := range svcMap.HealthCheckNodePorts() {
			res.HealthCheckNodePorts[nn.String()] = p
		}
		res.LocalReadyEndpoints = map[string]int{}
		for nn, n := range epMap.LocalReadyEndpoints() {
			res.LocalReadyEndpoints[nn.String()] = n
		}
		if len(round.Flows) > 0 {
			ct := &parityConntrack{}
			for _, f := range round.Flows {
				ct.flows = append(ct.flows, f.netlink())
			}
			conntrack.CleanStaleEntries(ct, sc.Family, svcMap, epMap)
			for _, d := range ct.deleted {
				res.ConntrackDeleted = append(res.ConntrackDeleted, parityFlow{
					Proto: d.Forward.Protocol, Dst: d.Forward.DstIP.String(), DPort: d.Forward.DstPort,
					ReplySrc: d.Reverse.SrcIP.String(), RPort: d.Reverse.SrcPort,
				}.String())
			}
			sort.Strings(res.ConntrackDeleted)
		}
		results = append(results, res)
	}
	return results
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
