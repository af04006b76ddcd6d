package client_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/legacyregistry"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
)

// Object builders: a valid object named victim, and mutate to break one field.
func globalSvc(name string, mutate ...func(*localnodev1.GlobalService)) *localnodev1.Op {
	g := &localnodev1.GlobalService{Namespace: "ns", Name: name, ClusterIps: []string{"10.96.0.1"},
		Ports: []*localnodev1.GlobalServicePort{{Protocol: localnodev1.Protocol_TCP, Port: 80}}}
	for _, m := range mutate {
		m(g)
	}
	return &localnodev1.Op{Op: &localnodev1.Op_SetGlobalService{SetGlobalService: g}}
}

func slice(name string, mutate ...func(*localnodev1.EndpointSlice)) *localnodev1.Op {
	s := &localnodev1.EndpointSlice{Namespace: "ns", Name: name, Service: name, AddressType: localnodev1.Family_IPV4,
		Ports:     []*localnodev1.EndpointPort{{Protocol: localnodev1.Protocol_TCP, Port: 8080, HasPort: true}},
		Endpoints: []*localnodev1.GlobalEndpoint{{Addresses: []string{"10.1.0.1"}, Ready: localnodev1.Condition_CONDITION_TRUE}}}
	for _, m := range mutate {
		m(s)
	}
	return &localnodev1.Op{Op: &localnodev1.Op_SetEndpointSlice{SetEndpointSlice: s}}
}

func nodeOp(name string, mutate ...func(*localnodev1.Node)) *localnodev1.Op {
	n := &localnodev1.Node{Name: name, Addresses: []*localnodev1.NodeAddress{{Type: "InternalIP", Address: "198.18.0.1"}}, PodCidrs: []string{"10.1.0.0/24"}}
	for _, m := range mutate {
		m(n)
	}
	return &localnodev1.Op{Op: &localnodev1.Op_SetNode{SetNode: n}}
}

func cidrOp(name string, cidrs ...string) *localnodev1.Op {
	return &localnodev1.Op{Op: &localnodev1.Op_SetServiceCidr{SetServiceCidr: &localnodev1.ServiceCIDR{Name: name, Cidrs: cidrs}}}
}

func localSvc(name string, mutate ...func(*localnodev1.Service)) *localnodev1.Op {
	s := &localnodev1.Service{Family: localnodev1.Family_IPV4, Name: &localnodev1.PortName{Namespace: "ns", Name: name, Protocol: localnodev1.Protocol_TCP},
		ClusterIp: "10.96.0.1", Port: 80, Endpoints: []*localnodev1.Endpoint{{Ip: "10.1.0.1", Port: 8080, Ready: true, Serving: true, ForCluster: true}}}
	for _, m := range mutate {
		m(s)
	}
	return &localnodev1.Op{Op: &localnodev1.Op_SetService{SetService: s}}
}

type globalCase struct {
	name    string
	op      *localnodev1.Op
	kind    string
	object  string // also: what stays held under that name
	wantErr string // the field and the value
}

// globalCases are one bad object of every kind the global view decodes, each broken
// in one field.
var globalCases = []globalCase{
	{"service without name", globalSvc("", func(g *localnodev1.GlobalService) { g.Namespace = "ns" }), "GlobalService", "ns/", `namespace "ns" and name "" must both be set`},
	{"service type", globalSvc("victim", func(g *localnodev1.GlobalService) { g.Type = "Bogus" }), "GlobalService", "ns/victim", `type: unknown service type "Bogus"`},
	{"service ip family", globalSvc("victim", func(g *localnodev1.GlobalService) { g.IpFamilies = []localnodev1.Family{7} }), "GlobalService", "ns/victim", "ip_families[0]: unknown IP family 7"},
	{"service port missing", globalSvc("victim", func(g *localnodev1.GlobalService) { g.Ports = []*localnodev1.GlobalServicePort{nil} }), "GlobalService", "ns/victim", "ports[0]: missing"},
	{"service protocol", globalSvc("victim", func(g *localnodev1.GlobalService) { g.Ports[0].Protocol = 9 }), "GlobalService", "ns/victim", "ports[0].protocol: unknown protocol 9"},
	{"service port zero", globalSvc("victim", func(g *localnodev1.GlobalService) { g.Ports[0].Port = 0 }), "GlobalService", "ns/victim", "ports[0].port: missing (0)"},
	{"service port range", globalSvc("victim", func(g *localnodev1.GlobalService) { g.Ports[0].Port = 70000 }), "GlobalService", "ns/victim", "ports[0].port: 70000 is not a port number"},
	{"service node port", globalSvc("victim", func(g *localnodev1.GlobalService) { g.Ports[0].NodePort = 70000 }), "GlobalService", "ns/victim", "ports[0].node_port: 70000"},
	{"service ingress missing", globalSvc("victim", func(g *localnodev1.GlobalService) { g.LoadBalancerIngress = []*localnodev1.LoadBalancerIngress{nil} }), "GlobalService", "ns/victim", "load_balancer_ingress[0]: missing"},
	{"service affinity", globalSvc("victim", func(g *localnodev1.GlobalService) { g.SessionAffinity = 5 }), "GlobalService", "ns/victim", "session_affinity: unknown session affinity 5"},
	{"service affinity timeout", globalSvc("victim", func(g *localnodev1.GlobalService) {
		g.SessionAffinity, g.AffinityTimeoutSeconds = localnodev1.Affinity_AFFINITY_CLIENT_IP, 90000
	}), "GlobalService", "ns/victim", "affinity_timeout_seconds: 90000 is more than 86400"},
	{"service internal policy", globalSvc("victim", func(g *localnodev1.GlobalService) { g.InternalPolicy = 4 }), "GlobalService", "ns/victim", "internal_policy: unknown traffic policy 4"},
	{"service external policy", globalSvc("victim", func(g *localnodev1.GlobalService) { g.ExternalPolicy = 4 }), "GlobalService", "ns/victim", "external_policy: unknown traffic policy 4"},
	{"service health check port", globalSvc("victim", func(g *localnodev1.GlobalService) { g.HealthCheckNodePort = 70000 }), "GlobalService", "ns/victim", "health_check_node_port: 70000"},
	{"slice without name", slice(""), "EndpointSlice", "ns/", `namespace "ns" and name "" must both be set`},
	{"slice address type", slice("victim", func(s *localnodev1.EndpointSlice) { s.AddressType = 0 }), "EndpointSlice", "ns/victim", "address_type: unknown IP family FAMILY_UNSPECIFIED"},
	{"slice port missing", slice("victim", func(s *localnodev1.EndpointSlice) { s.Ports = []*localnodev1.EndpointPort{nil} }), "EndpointSlice", "ns/victim", "ports[0]: missing"},
	{"slice protocol", slice("victim", func(s *localnodev1.EndpointSlice) { s.Ports[0].Protocol = 0 }), "EndpointSlice", "ns/victim", "ports[0].protocol: unknown protocol PROTOCOL_UNSPECIFIED"},
	{"slice port range", slice("victim", func(s *localnodev1.EndpointSlice) { s.Ports[0].Port = 70000 }), "EndpointSlice", "ns/victim", "ports[0].port: 70000 is not a port number"},
	{"slice endpoint missing", slice("victim", func(s *localnodev1.EndpointSlice) { s.Endpoints = append(s.Endpoints, nil) }), "EndpointSlice", "ns/victim", "endpoints[1]: missing"},
	{"slice ready", slice("victim", func(s *localnodev1.EndpointSlice) { s.Endpoints[0].Ready = 3 }), "EndpointSlice", "ns/victim", "endpoints[0].ready: unknown condition 3"},
	{"slice serving", slice("victim", func(s *localnodev1.EndpointSlice) { s.Endpoints[0].Serving = 3 }), "EndpointSlice", "ns/victim", "endpoints[0].serving: unknown condition 3"},
	{"slice terminating", slice("victim", func(s *localnodev1.EndpointSlice) { s.Endpoints[0].Terminating = 3 }), "EndpointSlice", "ns/victim", "endpoints[0].terminating: unknown condition 3"},
	{"node without name", nodeOp(""), "Node", "", "node: name: missing"},
	{"node address", nodeOp("victim", func(n *localnodev1.Node) { n.Addresses[0].Address = "198.18.0.300" }), "Node", "victim", `addresses[0]: InternalIP "198.18.0.300" is not an IP address`},
	{"node pod CIDR", nodeOp("victim", func(n *localnodev1.Node) { n.PodCidrs = []string{"10.1.0.0/33"} }), "Node", "victim", `pod_cidrs[0]: "10.1.0.0/33" is not a CIDR`},
	{"service CIDR without name", cidrOp("", "10.96.0.0/12"), "ServiceCIDR", "", "service cidr: name: missing"},
	{"service CIDR", cidrOp("victim", "10.96.0.1"), "ServiceCIDR", "victim", `cidrs[0]: "10.96.0.1" is not a CIDR`},
	{"empty op", &localnodev1.Op{}, "Op", "", "empty op"},
}

// TestGlobalApplyValidSkipsBadObjects: one bad object of any kind is skipped, named with
// its kind, name, field and value; the rest of the batch applies, and what was held under
// the bad object's name stays, also across a reset.
func TestGlobalApplyValidSkipsBadObjects(t *testing.T) {
	held, err := (&client.Global{}).Apply(&client.Batch{Reset: true, Ops: []*localnodev1.Op{
		globalSvc("victim"), slice("victim"), nodeOp("victim"), cidrOp("victim", "10.96.0.0/12")}})
	if err != nil {
		t.Fatal(err)
	}
	victim := types.NamespacedName{Namespace: "ns", Name: "victim"}
	for _, tc := range globalCases {
		for _, reset := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{true: " after a reset"}[reset], func(t *testing.T) {
				b := &client.Batch{Reset: reset, Ops: []*localnodev1.Op{globalSvc("good"), tc.op, slice("good")}}
				next, rejected := held.ApplyValid(b)
				if len(rejected) != 1 {
					t.Fatalf("rejected %v, want the one bad object", rejected)
				}
				r := rejected[0]
				if r.Op != 1 || r.Kind != tc.kind || r.Object != tc.object || !strings.Contains(r.Err.Error(), tc.wantErr) {
					t.Errorf("rejected %+v (%v), want op 1, kind %q, object %q, error containing %q", r, r.Err, tc.kind, tc.object, tc.wantErr)
				}
				good := types.NamespacedName{Namespace: "ns", Name: "good"}
				if next.Services[good] == nil || next.Slices[good] == nil {
					t.Errorf("the good objects of the batch were not applied")
				}
				switch {
				case tc.kind == "GlobalService" && tc.object == "ns/victim":
					if next.Services[victim] != held.Services[victim] {
						t.Errorf("the held Service %s was not kept", victim)
					}
				case tc.kind == "EndpointSlice" && tc.object == "ns/victim":
					if next.Slices[victim] != held.Slices[victim] {
						t.Errorf("the held EndpointSlice %s was not kept", victim)
					}
				case tc.kind == "Node" && tc.object != "":
					if next.Node != held.Node {
						t.Errorf("the held Node was not kept")
					}
				case tc.kind == "ServiceCIDR" && tc.object != "":
					if c := (types.NamespacedName{Name: "victim"}); next.ServiceCIDRs[c] != held.ServiceCIDRs[c] {
						t.Errorf("the held ServiceCIDR was not kept")
					}
				}
				if _, err := held.Apply(b); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Apply: err = %v, want the whole batch refused as before, with %q", err, tc.wantErr)
				}
			})
		}
	}
}

type localCase struct {
	name    string
	op      *localnodev1.Op
	kind    string
	object  string
	wantErr string
}

// localCases are one bad object of every kind the node-local view decodes.
var localCases = []localCase{
	{"family", localSvc("victim", func(s *localnodev1.Service) { s.Family = 9 }), "Service", "", "family: unknown IP family 9"},
	{"name missing", localSvc("victim", func(s *localnodev1.Service) { s.Name = nil }), "Service", "", "name: missing"},
	{"name empty", localSvc("", func(s *localnodev1.Service) {}), "Service", "", `namespace "ns" and name "" must both be set`},
	{"protocol", localSvc("victim", func(s *localnodev1.Service) { s.Name.Protocol = 8 }), "Service", "", "name.protocol: unknown protocol 8"},
	{"cluster IP malformed", localSvc("victim", func(s *localnodev1.Service) { s.ClusterIp = "10.96.0.256" }), "Service", "ns/victim/TCP", `cluster_ip: "10.96.0.256" is not an IP address`},
	{"cluster IP family", localSvc("victim", func(s *localnodev1.Service) { s.ClusterIp = "fd00::1" }), "Service", "ns/victim/TCP", `cluster_ip: "fd00::1" is not an IPv4 address`},
	{"port zero", localSvc("victim", func(s *localnodev1.Service) { s.Port = 0 }), "Service", "ns/victim/TCP", "port: missing (0)"},
	{"port range", localSvc("victim", func(s *localnodev1.Service) { s.Port = 65536 }), "Service", "ns/victim/TCP", "port: 65536 is not a port number"},
	{"node port", localSvc("victim", func(s *localnodev1.Service) { s.NodePort = 65536 }), "Service", "ns/victim/TCP", "node_port: 65536"},
	{"health check node port", localSvc("victim", func(s *localnodev1.Service) { s.HealthCheckNodePort = 65536 }), "Service", "ns/victim/TCP", "health_check_node_port: 65536"},
	{"external IP", localSvc("victim", func(s *localnodev1.Service) { s.ExternalIps = []string{"nope"} }), "Service", "ns/victim/TCP", `external_ips: [0]: "nope" is not an IP address`},
	{"load balancer VIP", localSvc("victim", func(s *localnodev1.Service) { s.LoadBalancerVips = []string{"fe80::1%eth0"} }), "Service", "ns/victim/TCP", `load_balancer_vips: [0]: "fe80::1%eth0"`},
	{"source range", localSvc("victim", func(s *localnodev1.Service) { s.SourceRanges = []string{"10.0.0.0/40"} }), "Service", "ns/victim/TCP", `source_ranges[0]: netip.ParsePrefix("10.0.0.0/40")`},
	{"source range family", localSvc("victim", func(s *localnodev1.Service) { s.SourceRanges = []string{"fd00::/64"} }), "Service", "ns/victim/TCP", `source_ranges[0]: "fd00::/64" is not an IPv4 prefix`},
	{"affinity", localSvc("victim", func(s *localnodev1.Service) { s.SessionAffinity = 7 }), "Service", "ns/victim/TCP", "session_affinity: unknown session affinity 7"},
	{"affinity timeout", localSvc("victim", func(s *localnodev1.Service) { s.AffinityTimeoutSeconds = 86401 }), "Service", "ns/victim/TCP", "affinity_timeout_seconds: 86401 is more than 86400"},
	{"internal policy", localSvc("victim", func(s *localnodev1.Service) { s.InternalPolicy = 6 }), "Service", "ns/victim/TCP", "internal_policy: unknown traffic policy 6"},
	{"external policy", localSvc("victim", func(s *localnodev1.Service) { s.ExternalPolicy = 6 }), "Service", "ns/victim/TCP", "external_policy: unknown traffic policy 6"},
	{"endpoint missing", localSvc("victim", func(s *localnodev1.Service) { s.Endpoints = append(s.Endpoints, nil) }), "Service", "ns/victim/TCP", "endpoints[1]: missing"},
	{"endpoint address", localSvc("victim", func(s *localnodev1.Service) { s.Endpoints[0].Ip = "10.1.0" }), "Service", "ns/victim/TCP", `endpoints[0].ip: "10.1.0" is not an IP address`},
	{"endpoint port", localSvc("victim", func(s *localnodev1.Service) { s.Endpoints[0].Port = 0 }), "Service", "ns/victim/TCP", "endpoints[0].port: missing (0)"},
	{"delete family", &localnodev1.Op{Op: &localnodev1.Op_DeleteService{DeleteService: &localnodev1.ServiceKey{Name: &localnodev1.PortName{Namespace: "ns", Name: "victim", Protocol: localnodev1.Protocol_TCP}}}}, "ServiceKey", "", "delete_service: family: unknown IP family FAMILY_UNSPECIFIED"},
	{"delete name", &localnodev1.Op{Op: &localnodev1.Op_DeleteService{DeleteService: &localnodev1.ServiceKey{Family: localnodev1.Family_IPV4}}}, "ServiceKey", "", "delete_service: name: missing"},
	{"empty op", &localnodev1.Op{}, "Op", "", "empty op"},
}

// TestNodeLocalApplyValidSkipsBadObjects is TestGlobalApplyValidSkipsBadObjects for the
// node-local view RunBackend holds.
func TestNodeLocalApplyValidSkipsBadObjects(t *testing.T) {
	held, _, err := client.NewNodeLocal().Apply(&client.Batch{Reset: true, Ops: []*localnodev1.Op{localSvc("victim")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range localCases {
		for _, reset := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{true: " after a reset"}[reset], func(t *testing.T) {
				b := &client.Batch{Reset: reset, Ops: []*localnodev1.Op{localSvc("good"), tc.op}}
				next, _, rejected := held.ApplyValid(b)
				if len(rejected) != 1 {
					t.Fatalf("rejected %v, want the one bad object", rejected)
				}
				r := rejected[0]
				if r.Op != 1 || r.Kind != tc.kind || r.Object != tc.object || !strings.Contains(r.Err.Error(), tc.wantErr) {
					t.Errorf("rejected %+v (%v), want op 1, kind %q, object %q, error containing %q", r, r.Err, tc.kind, tc.object, tc.wantErr)
				}
				names := map[string]bool{}
				for _, s := range next.State(localnode.IPv4).Services {
					names[s.Name.Name] = true
				}
				if !names["good"] {
					t.Errorf("the good service of the batch was not applied: %v", names)
				}
				// The held victim stays where its name decoded, or without a reset.
				if wantVictim := tc.object != "" || !reset; names["victim"] != wantVictim {
					t.Errorf("victim held: %v, want %v", names["victim"], wantVictim)
				}
				if _, _, err := held.Apply(b); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Apply: err = %v, want the whole batch refused as before, with %q", err, tc.wantErr)
				}
			})
		}
	}
}

// rejectedCount reads kubeproxy_localnode_client_rejected_objects_total{kind}.
func rejectedCount(t *testing.T, kind string) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kubeproxy_localnode_client_rejected_objects_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// serveOnce answers every Watch with ops as one complete batch, then holds the stream.
func serveOnce(ops []*localnodev1.Op) func(*localnodev1.WatchRequest, localnodev1.LocalNode_WatchServer) error {
	return func(_ *localnodev1.WatchRequest, stream localnodev1.LocalNode_WatchServer) error {
		if err := stream.Send(&localnodev1.WatchEvent{InstanceId: "bad-objects", Reset_: true, Revision: 1, Synced: true, Ops: ops}); err != nil {
			return err
		}
		<-stream.Context().Done()
		return nil
	}
}

// TestSourceProgramsAroundBadObjects: a server whose state holds one bad object of every
// kind still feeds the handler everything else, and each bad object is counted by kind
// (issue 36: one bad object refused the whole state and nothing was programmed).
func TestSourceProgramsAroundBadObjects(t *testing.T) {
	client.RegisterMetrics()
	ops := []*localnodev1.Op{globalSvc("good"), slice("good"), nodeOp(node), cidrOp("kubernetes", "10.96.0.0/12")}
	wantRejected := map[string]float64{}
	for _, tc := range globalCases {
		// A bad Node after the good one leaves the good one (covered above); a nil list
		// element cannot be sent, it arrives as an empty message.
		if tc.kind == "Node" || strings.HasSuffix(tc.name, " missing") {
			continue
		}
		ops = append(ops, tc.op)
		wantRejected[tc.kind]++
	}
	before := map[string]float64{}
	for kind := range wantRejected {
		before[kind] = rejectedCount(t, kind)
	}
	addr, _ := startFake(t, "", serveOnce(ops))
	h := newGlobalRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = client.NewSource(client.Options{Address: addr, MinBackoff: 10 * time.Millisecond}).Run(ctx, h)
	})
	defer func() {
		cancel()
		wg.Wait()
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h.mu.Lock()
		synced, services, slices, n := h.synced, len(h.services), len(h.slices), h.node
		h.mu.Unlock()
		if synced {
			if services != 1 || slices != 1 || n == nil || n.Name != node {
				t.Errorf("handler got %d services, %d slices, node %v; want the good service, slice and Node", services, slices, n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no state delivered: one bad object kept the client from applying the rest")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for kind, want := range wantRejected {
		if got := rejectedCount(t, kind) - before[kind]; got != want {
			t.Errorf("rejected %s counted %v times, want %v", kind, got, want)
		}
	}
}

// TestRunBackendProgramsAroundBadObjects: the node-local client hands the backend every
// service but the bad ones.
func TestRunBackendProgramsAroundBadObjects(t *testing.T) {
	ops := []*localnodev1.Op{localSvc("good")}
	for _, tc := range localCases {
		if !strings.HasSuffix(tc.name, " missing") || tc.name == "name missing" {
			ops = append(ops, tc.op)
		}
	}
	addr, _ := startFake(t, "", serveOnce(ops))
	got := make(chan *localnode.State, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = client.RunBackend(ctx, client.Options{Address: addr, MinBackoff: 10 * time.Millisecond}, recorder(func(s *localnode.State) error {
			select {
			case got <- s:
			default:
			}
			return nil
		}), time.Second)
	})
	defer func() {
		cancel()
		wg.Wait()
	}()
	select {
	case s := <-got:
		if len(s.Services) != 1 || s.Services[0].Name.Name != "good" {
			t.Errorf("backend got %v, want the good service alone", s.Services)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no state handed to the backend: one bad object kept the client from applying the rest")
	}
}
