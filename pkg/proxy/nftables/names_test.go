//go:build linux

package nftables

import (
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	long := strings.Repeat("a", 63)
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"service base", servicePortBaseName("ns1", "svc1", "tcp", "p80"), "ULMVA6XW-ns1/svc1/tcp/p80"},
		{"cluster chain", clusterPolicyChainPrefix + servicePortBaseName("ns1", "svc1", "tcp", "p80"), "service-ULMVA6XW-ns1/svc1/tcp/p80"},
		{"endpoint v4", endpointBaseName("ns1", "svc1", "tcp", "p80", "10.180.0.1:80"), "5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"},
		{"reject chain", localhostNodePortRejectChainName("UDP"), "localhost-nodeport-reject-udp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}

	v6 := endpointBaseName("ns1", "svc1", "tcp", "p80", "[fd00:10:180::1]:80")
	if strings.Contains(v6, ":") || !strings.HasSuffix(v6, "__fd00.10.180..1/80") {
		t.Errorf("IPv6 endpoint base name %q must replace colons with dots", v6)
	}
	huge := endpointBaseName(long, long, "sctp", long, "[1111:2222:3333:4444:5555:6666:7777:8888]:65535")
	if len(huge) != chainNameBaseLengthMax || !strings.HasSuffix(huge, "...") {
		t.Errorf("overlong name not truncated to %d with ...: %d %q", chainNameBaseLengthMax, len(huge), huge)
	}
	if !isServiceChainName("service-X-a/b/tcp/") || isServiceChainName(servicesChain) {
		t.Errorf("isServiceChainName misclassifies")
	}
}
