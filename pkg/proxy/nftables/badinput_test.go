//go:build linux

package nftables

import (
	"context"
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"k8s.io/kube-proxy/pkg/proxy"
)

// fakeServicePort and fakeEndpoint are third-party implementations of the
// public interfaces (as Calico has), which the proxier must not trust.
type fakeServicePort struct {
	clusterIP net.IP
	port      int
	nodePort  int
	protocol  v1.Protocol
}

func (f *fakeServicePort) String() string                          { return "fake" }
func (f *fakeServicePort) ClusterIP() net.IP                       { return f.clusterIP }
func (f *fakeServicePort) Port() int                               { return f.port }
func (f *fakeServicePort) SessionAffinityType() v1.ServiceAffinity { return v1.ServiceAffinityNone }
func (f *fakeServicePort) StickyMaxAgeSeconds() int                { return 0 }
func (f *fakeServicePort) ExternalIPs() []net.IP                   { return nil }
func (f *fakeServicePort) LoadBalancerVIPs() []net.IP              { return nil }
func (f *fakeServicePort) Protocol() v1.Protocol                   { return f.protocol }
func (f *fakeServicePort) LoadBalancerSourceRanges() []*net.IPNet  { return nil }
func (f *fakeServicePort) HealthCheckNodePort() int                { return 0 }
func (f *fakeServicePort) NodePort() int                           { return f.nodePort }
func (f *fakeServicePort) ExternalPolicyLocal() bool               { return false }
func (f *fakeServicePort) InternalPolicyLocal() bool               { return false }
func (f *fakeServicePort) ExternallyAccessible() bool              { return f.nodePort != 0 }
func (f *fakeServicePort) UsesClusterEndpoints() bool              { return true }
func (f *fakeServicePort) UsesLocalEndpoints() bool                { return false }

type fakeEndpoint struct {
	ip   string
	port int
}

func (e *fakeEndpoint) String() string              { return net.JoinHostPort(e.ip, itoa(e.port)) }
func (e *fakeEndpoint) IP() string                  { return e.ip }
func (e *fakeEndpoint) Port() int                   { return e.port }
func (e *fakeEndpoint) IsLocal() bool               { return false }
func (e *fakeEndpoint) IsReady() bool               { return true }
func (e *fakeEndpoint) IsServing() bool             { return true }
func (e *fakeEndpoint) IsTerminating() bool         { return false }
func (e *fakeEndpoint) ZoneHints() sets.Set[string] { return nil }
func (e *fakeEndpoint) NodeHints() sets.Set[string] { return nil }

func TestBadInputIsSkipped(t *testing.T) {
	tf := families[0]
	name := func(n string) proxy.ServicePortName {
		return proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bad", Name: n}, Port: "p", Protocol: v1.ProtocolTCP}
	}
	tests := []struct {
		name      string
		svc       *fakeServicePort
		eps       []proxy.Endpoint
		skipped   bool
		wantDNATs []string
	}{
		{"no cluster IP", &fakeServicePort{port: 80, protocol: v1.ProtocolTCP}, nil, true, nil},
		{"cluster IP of the other family", &fakeServicePort{clusterIP: net.ParseIP("fd00::1"), port: 80, protocol: v1.ProtocolTCP}, nil, true, nil},
		{"unknown protocol", &fakeServicePort{clusterIP: net.ParseIP("172.30.9.1"), port: 80, protocol: "ICMP"}, nil, true, nil},
		{"port out of range", &fakeServicePort{clusterIP: net.ParseIP("172.30.9.2"), port: 70000, protocol: v1.ProtocolTCP}, nil, true, nil},
		{"negative NodePort", &fakeServicePort{clusterIP: net.ParseIP("172.30.9.3"), port: 80, nodePort: -1, protocol: v1.ProtocolTCP}, nil, true, nil},
		{"invalid endpoints are dropped, valid kept", &fakeServicePort{clusterIP: net.ParseIP("172.30.9.4"), port: 80, protocol: v1.ProtocolTCP},
			[]proxy.Endpoint{&fakeEndpoint{ip: "not-an-ip", port: 80}, &fakeEndpoint{ip: "fd00::5", port: 80}, &fakeEndpoint{ip: "10.180.9.4", port: 0}, &fakeEndpoint{ip: "10.180.9.5", port: 80}},
			false, []string{"10.180.9.5:80"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newTestProxier(t, tf, nil)
			spn := name(strings.ReplaceAll(tc.name, " ", "-"))
			// The shell leaves these out for every backend (syncshell's
			// TestShellLeavesOutWhatNoBackendCanProgram); checked here against
			// this proxier's family, with what the model makes of the rest.
			if valid := proxy.ServicePortProblem(p.ipFamily, tc.svc) == ""; valid == tc.skipped {
				t.Fatalf("service port valid = %v, want %v", valid, !tc.skipped)
			}
			if tc.skipped {
				return
			}
			kept := proxy.UsableEndpoints(tc.eps, func(ep proxy.Endpoint) bool { return proxy.EndpointProblem(p.ipFamily, ep) == "" }, nil)
			var got []string
			for _, ep := range kept {
				got = append(got, ep.String())
			}
			if strings.Join(got, ",") != strings.Join(tc.wantDNATs, ",") {
				t.Fatalf("usable endpoints = %v, want %v", got, tc.wantDNATs)
			}
			m, _ := p.model(context.Background(), spn, tc.svc, &proxy.TrafficPolicy{ClusterEndpoints: kept, ReachableEndpoints: kept, HasEndpoints: len(kept) > 0})
			var modelled []string
			for _, ep := range m.clusterEndpoints {
				modelled = append(modelled, ep.endpoint)
			}
			if strings.Join(modelled, ",") != strings.Join(tc.wantDNATs, ",") {
				t.Fatalf("modelled endpoints = %v, want %v", modelled, tc.wantDNATs)
			}
		})
	}
}

// FuzzServiceCIDRs feeds arbitrary ServiceCIDR strings: invalid ones are
// ignored, and whatever is accepted must load into the (fake) table and be
// of the proxier's family.
func FuzzServiceCIDRs(f *testing.F) {
	for _, seed := range []string{"172.30.0.0/16", "fd00::/108", "", "garbage", "10.0.0.1", "1.2.3.4/33", "::/0,0.0.0.0/0", "010.1.1.0/24", "::ffff:1.2.3.0/120"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, tf := range families {
			p, fake := newTestProxier(t, tf, nil)
			p.OnServiceCIDRsChanged(strings.Split(in, ","))
			startProxier(p, nil, nil)
			for _, cidr := range strings.Split(p.syncer.serviceCIDRs, ",") {
				if cidr == "" {
					continue
				}
				_, n, err := net.ParseCIDR(cidr)
				if err != nil || (tf.family == v1.IPv4Protocol) != (len(n.Mask) == net.IPv4len) {
					t.Fatalf("%s proxier accepted %q", tf.family, cidr)
				}
			}
			if fake.Dump() == "" {
				t.Fatalf("sync produced no table for input %q", in)
			}
		}
	})
}

// FuzzEndpointNames checks the naming invariants nft relies on for any
// endpoint string: bounded length, no characters illegal in identifiers.
func FuzzEndpointNames(f *testing.F) {
	f.Add("ns", "svc", "p", "10.0.0.1:80")
	f.Add("a", "b", "", "[fd00::1]:443")
	f.Add("x", "y", "z", "garbage")
	f.Fuzz(func(t *testing.T, ns, svc, port, ep string) {
		for _, s := range []string{ns, svc, port} {
			// Kubernetes names are DNS labels; nothing else reaches here.
			for _, r := range s {
				if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
					return
				}
			}
			if len(s) > 63 {
				return
			}
		}
		ip, p, err := net.SplitHostPort(ep)
		if err != nil || net.ParseIP(ip) == nil {
			return
		}
		_ = p
		name := endpointBaseName(ns, svc, "tcp", port, ep)
		if len(name) > chainNameBaseLengthMax {
			t.Fatalf("name too long: %d", len(name))
		}
		if strings.ContainsAny(name, ": \"{}") {
			t.Fatalf("illegal character in %q", name)
		}
		if !isServiceChainName(endpointChainPrefix + name) {
			t.Fatalf("%q not recognised as a service chain", name)
		}
		_ = context.Background
	})
}
