package behaviour

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// testAddresses are placeholder ranges: the table's own tests only read
// what Table builds from them.
var testAddresses = []Addresses{{
	Family: v1.IPv4Protocol, NodeName: "node1", Node: "192.168.0.2",
	ServiceIP: func(i int) string { return fmt.Sprintf("172.30.0.%d", i) },
	LocalPod:  func(i int) string { return fmt.Sprintf("10.0.1.%d", i) },
	RemotePod: func(i int) string { return fmt.Sprintf("10.0.2.%d", i) },
	External:  "203.0.113.5", AllowedRange: "203.0.113.0/24", DeniedClient: "198.18.0.9",
	ExternalIP: "192.0.2.20", LoadBalancerIP: "198.51.100.10",
}, {
	Family: v1.IPv6Protocol, NodeName: "node1", Node: "fd00:192::2",
	ServiceIP: func(i int) string { return fmt.Sprintf("fd00:172:30::%x", i) },
	LocalPod:  func(i int) string { return fmt.Sprintf("fd00:10::1:%x", i) },
	RemotePod: func(i int) string { return fmt.Sprintf("fd00:10::2:%x", i) },
	External:  "2001:db8::5", AllowedRange: "2001:db8::/64", DeniedClient: "2001:db8:1::9",
	ExternalIP: "2001:db8:200::20", LoadBalancerIP: "2001:db8:100::10",
}}

var proxiers = []Proxier{IPTables, NFTables, IPVS, WinKernel}

// TestTableIsWellFormed guards the table against entries that would make a
// proxier's run pass for the wrong reason: a deviation equal to the common
// expectation (stale, it hides nothing but claims a difference), one
// without a reason, one for an unknown proxier, a DNAT without endpoints,
// or a packet of the wrong family.
func TestTableIsWellFormed(t *testing.T) {
	for i, a := range testAddresses {
		other := testAddresses[1-i]
		t.Run(string(a.Family), func(t *testing.T) {
			names := map[string]bool{}
			for _, sc := range Table(a, other) {
				if names[sc.Name] {
					t.Errorf("scenario %q twice", sc.Name)
				}
				names[sc.Name] = true
				if len(sc.Checks) == 0 {
					t.Errorf("%s: no checks", sc.Name)
				}
				for _, c := range sc.Checks {
					where := sc.Name + ": " + c.Name
					for _, ip := range []string{c.Packet.Src, c.Packet.Dst} {
						addr, err := netip.ParseAddr(ip)
						if err != nil || addr.Is6() != (a.Family == v1.IPv6Protocol) {
							t.Errorf("%s: packet address %q is not an %s address", where, ip, a.Family)
						}
					}
					outcomes := []Outcome{c.Want}
					for p, d := range c.Except {
						if !containsProxier(p) {
							t.Errorf("%s: deviation for unknown proxier %q", where, p)
						}
						if strings.TrimSpace(d.Reason) == "" {
							t.Errorf("%s: %s's deviation has no reason", where, p)
						}
						if Same(d.Want, c.Want) {
							t.Errorf("%s: %s's deviation is the common expectation %s", where, p, c.Want)
						}
						outcomes = append(outcomes, d.Want)
					}
					for _, o := range outcomes {
						if (o.Verdict == DNAT) != (len(o.Endpoints) > 0) {
							t.Errorf("%s: outcome %s: endpoints only and always with DNAT", where, o)
						}
					}
				}
			}
		})
	}
}

func containsProxier(p Proxier) bool {
	for _, q := range proxiers {
		if p == q {
			return true
		}
	}
	return false
}

// TestTableCovers keeps the table covering what every proxier must be
// checked on; it looks at the objects, so renaming a scenario does not
// count as dropping it.
func TestTableCovers(t *testing.T) {
	has := map[string]bool{}
	for _, sc := range Table(testAddresses[0], testAddresses[1]) {
		if len(sc.Slices) == 0 {
			has["no endpoints"] = true
		}
		if sc.NodeLabels[v1.LabelTopologyZone] != "" {
			has["topology"] = true
		}
		for _, s := range sc.Services {
			spec := s.Spec
			has["nodeport"] = has["nodeport"] || spec.Type == v1.ServiceTypeNodePort
			has["load balancer source ranges"] = has["load balancer source ranges"] ||
				spec.Type == v1.ServiceTypeLoadBalancer && len(spec.LoadBalancerSourceRanges) > 0
			has["external IPs"] = has["external IPs"] || len(spec.ExternalIPs) > 0
			has["eTP Local"] = has["eTP Local"] || spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
			has["iTP Local"] = has["iTP Local"] || spec.InternalTrafficPolicy != nil && *spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
			has["affinity"] = has["affinity"] || spec.SessionAffinity == v1.ServiceAffinityClientIP
			has["dual-stack"] = has["dual-stack"] || len(spec.IPFamilies) == 2
			for _, p := range spec.Ports {
				has["udp"] = has["udp"] || p.Protocol == v1.ProtocolUDP
			}
		}
		for _, sl := range sc.Slices {
			for _, e := range sl.Endpoints {
				has["terminating"] = has["terminating"] || e.Conditions.Terminating != nil && *e.Conditions.Terminating
			}
		}
	}
	for _, want := range []string{"no endpoints", "topology", "nodeport", "load balancer source ranges", "external IPs",
		"eTP Local", "iTP Local", "affinity", "dual-stack", "udp", "terminating"} {
		if !has[want] {
			t.Errorf("the table has no scenario with %s", want)
		}
	}
}

func TestSame(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b Outcome
		want bool
	}{
		{"endpoint order does not matter", dnat(false, "a", "b"), dnat(false, "b", "a"), true},
		{"another endpoint set", dnat(false, "a", "b"), dnat(false, "a"), false},
		{"masquerade matters", dnat(true, "a"), dnat(false, "a"), false},
		{"affinity matters", Outcome{Verdict: DNAT, Endpoints: []string{"a"}, Affinity: true}, dnat(false, "a"), false},
		{"verdicts differ", Outcome{Verdict: Drop}, Outcome{Verdict: Reject}, false},
		{"a drop is a drop", Outcome{Verdict: Drop, Masquerade: true}, Outcome{Verdict: Drop}, true},
	} {
		if got := Same(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: Same(%s, %s) = %v", tc.name, tc.a, tc.b, got)
		}
	}
}

func TestFromTrace(t *testing.T) {
	acc := func(dnat string, masq bool) trace.Outcome {
		return trace.Outcome{Verdict: trace.Accept, DNAT: dnat, Masquerade: masq}
	}
	for _, tc := range []struct {
		name    string
		res     trace.Result
		want    Outcome
		wantErr bool
	}{
		{name: "two endpoints", res: trace.Result{Outcomes: []trace.Outcome{acc("10.0.0.1:80", true), acc("10.0.0.2:80", true)}},
			want: dnat(true, "10.0.0.1:80", "10.0.0.2:80")},
		{name: "untouched", res: trace.Result{Outcomes: []trace.Outcome{acc("", false)}}, want: Outcome{Verdict: NoMatch}},
		{name: "reject", res: trace.Result{Outcomes: []trace.Outcome{{Verdict: trace.Reject}}}, want: Outcome{Verdict: Reject}},
		{name: "ipvs without real server", res: trace.Result{Outcomes: []trace.Outcome{{Verdict: trace.Reject, IPVS: &trace.IPVSChoice{}}}},
			want: Outcome{Verdict: EmptyVirtualServer}},
		{name: "ipvs persistence is affinity",
			res:  trace.Result{Outcomes: []trace.Outcome{{Verdict: trace.Accept, DNAT: "10.0.0.1:80", IPVS: &trace.IPVSChoice{PersistenceTimeout: 600}}}},
			want: Outcome{Verdict: DNAT, Endpoints: []string{"10.0.0.1:80"}, Affinity: true}},
		{name: "recent list is affinity",
			res:  trace.Result{Outcomes: []trace.Outcome{{Verdict: trace.Accept, DNAT: "10.0.0.1:80", AffinitySet: []string{"recent:X"}}}},
			want: Outcome{Verdict: DNAT, Endpoints: []string{"10.0.0.1:80"}, Affinity: true}},
		{name: "paths disagree on the verdict", res: trace.Result{Outcomes: []trace.Outcome{acc("10.0.0.1:80", false), {Verdict: trace.Drop}}}, wantErr: true},
		{name: "paths disagree on masquerade", res: trace.Result{Outcomes: []trace.Outcome{acc("10.0.0.1:80", false), acc("10.0.0.2:80", true)}}, wantErr: true},
		{name: "unmodelled rule", res: trace.Result{Outcomes: []trace.Outcome{acc("", false)}, Unknowns: []trace.UnknownRule{{}}}, wantErr: true},
		{name: "no outcome", res: trace.Result{}, wantErr: true},
	} {
		got, err := FromTrace(&tc.res)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.wantErr)
			continue
		}
		if err == nil && !Same(got, tc.want) {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestWithSourceRanges(t *testing.T) {
	for _, tc := range []struct {
		name                           string
		in                             Addresses
		wantRange, wantDenied, wantErr string
	}{
		{name: "IPv4 defaults", in: Addresses{External: "203.0.113.5", Node: "192.168.0.2"},
			wantRange: "203.0.113.0/24", wantDenied: "198.18.0.9"},
		{name: "IPv6 defaults", in: Addresses{External: "2001:db8::5", Node: "fd00:192::2"},
			wantRange: "2001:db8::/64", wantDenied: "2001:db8:1::9"},
		{name: "given ranges are kept", in: Addresses{External: "203.0.113.5", Node: "192.168.0.2", AllowedRange: "203.0.113.0/25", DeniedClient: "203.0.113.200"},
			wantRange: "203.0.113.0/25", wantDenied: "203.0.113.200"},
		{name: "node inside the range", in: Addresses{External: "192.168.0.5", Node: "192.168.0.2"},
			wantErr: "Addresses.Node 192.168.0.2 must be outside AllowedRange 192.168.0.0/24"},
		{name: "external outside a given range", in: Addresses{External: "203.0.113.5", Node: "192.168.0.2", AllowedRange: "203.0.113.128/25"},
			wantErr: "Addresses.External 203.0.113.5 must be inside AllowedRange 203.0.113.128/25"},
		{name: "denied client inside the range", in: Addresses{External: "198.18.0.5", Node: "192.168.0.2"},
			wantErr: "Addresses.DeniedClient 198.18.0.9 must be outside AllowedRange 198.18.0.0/24"},
		{name: "no external client", in: Addresses{Node: "192.168.0.2"},
			wantErr: `Addresses.External ""`},
		{name: "bad range", in: Addresses{External: "203.0.113.5", Node: "192.168.0.2", AllowedRange: "203.0.113.0/33"},
			wantErr: `Addresses.AllowedRange "203.0.113.0/33"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.withSourceRanges()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.AllowedRange != tc.wantRange || got.DeniedClient != tc.wantDenied {
				t.Errorf("got range %s and denied client %s, want %s and %s", got.AllowedRange, got.DeniedClient, tc.wantRange, tc.wantDenied)
			}
		})
	}
}
