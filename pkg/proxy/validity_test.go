package proxy

import (
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// foreignEndpoint is an Endpoint of another implementation, as embedders
// hand to backends.
type foreignEndpoint struct {
	BaseEndpointInfo
	ip   string
	port int
}

func (e *foreignEndpoint) IP() string { return e.ip }
func (e *foreignEndpoint) Port() int  { return e.port }

func TestServicePortProblem(t *testing.T) {
	port := func(ip string, mut func(*BaseServicePortInfo)) *BaseServicePortInfo {
		p := &BaseServicePortInfo{clusterIP: net.ParseIP(ip), port: 80, protocol: v1.ProtocolTCP}
		if mut != nil {
			mut(p)
		}
		return p
	}
	tests := []struct {
		name   string
		family v1.IPFamily
		svc    *BaseServicePortInfo
		want   string // substring of the problem; "" for none
	}{
		{"valid IPv4", v1.IPv4Protocol, port("10.0.0.1", nil), ""},
		{"valid IPv6", v1.IPv6Protocol, port("fd00::1", nil), ""},
		{"no cluster IP", v1.IPv4Protocol, port("", nil), "missing"},
		{"unspecified cluster IP", v1.IPv4Protocol, port("0.0.0.0", nil), "unspecified"},
		{"IPv6 cluster IP in IPv4", v1.IPv4Protocol, port("fd00::1", nil), "is not IPv4"},
		{"IPv4 cluster IP in IPv6", v1.IPv6Protocol, port("10.0.0.1", nil), "is not IPv6"},
		{"port 0", v1.IPv4Protocol, port("10.0.0.1", func(p *BaseServicePortInfo) { p.port = 0 }), "port 0"},
		{"port too big", v1.IPv4Protocol, port("10.0.0.1", func(p *BaseServicePortInfo) { p.port = 70000 }), "port 70000"},
		{"negative node port", v1.IPv4Protocol, port("10.0.0.1", func(p *BaseServicePortInfo) { p.nodePort = -1 }), "nodePort -1"},
		{"health check node port too big", v1.IPv4Protocol, port("10.0.0.1", func(p *BaseServicePortInfo) { p.healthCheckNodePort = 65536 }), "healthCheckNodePort 65536"},
		{"unknown protocol", v1.IPv4Protocol, port("10.0.0.1", func(p *BaseServicePortInfo) { p.protocol = "ICMP" }), `"ICMP"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ServicePortProblem(tc.family, tc.svc)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("ServicePortProblem = %q, want one containing %q", got, tc.want)
			}
		})
	}
}

func TestEndpointProblem(t *testing.T) {
	tests := []struct {
		name   string
		family v1.IPFamily
		ep     Endpoint
		want   string
	}{
		{"the tracker's own endpoint is trusted", v1.IPv4Protocol, &BaseEndpointInfo{}, ""},
		{"valid IPv4", v1.IPv4Protocol, &foreignEndpoint{ip: "10.1.0.1", port: 80}, ""},
		{"valid IPv6", v1.IPv6Protocol, &foreignEndpoint{ip: "fd00::5", port: 80}, ""},
		{"IPv4-mapped IPv6 counts as IPv4", v1.IPv4Protocol, &foreignEndpoint{ip: "::ffff:10.1.0.1", port: 80}, ""},
		{"not an IP", v1.IPv4Protocol, &foreignEndpoint{ip: "not-an-ip", port: 80}, `invalid IP "not-an-ip"`},
		{"wrong family", v1.IPv4Protocol, &foreignEndpoint{ip: "fd00::5", port: 80}, "is not IPv4"},
		{"port 0", v1.IPv4Protocol, &foreignEndpoint{ip: "10.1.0.1", port: 0}, "port 0"},
		{"port too big", v1.IPv6Protocol, &foreignEndpoint{ip: "fd00::5", port: 65536}, "port 65536"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := EndpointProblem(tc.family, tc.ep)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("EndpointProblem = %q, want one containing %q", got, tc.want)
			}
		})
	}
}
