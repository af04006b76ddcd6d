//go:build linux

package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
	"testing"
)

func TestChainNames(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		// Values confirmed against upstream v1.37.2's own tests.
		{"svc", svcChainPrefix + serviceChainHash("ns1/svc1:p80", "tcp"), "KUBE-SVC-XPGD46QRK7WJZT7O"},
		{"sep", string(endpointChainName("ns1/svc1:p80", "tcp", "10.180.0.1:80")), "KUBE-SEP-SXIVWICOYRO3J4NJ"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

// hash16 encodes only ten digest bytes; it must equal the full encoding's prefix.
func TestHash16MatchesFullEncoding(t *testing.T) {
	inputs := []string{"", "a", "ns1/svc1:p80tcp", "ns/very-long-service-name-" + strings.Repeat("x", 300) + "udp",
		"ns/svc:dnssctp[fd00::1]:53"}
	for _, in := range inputs {
		sum := sha256.Sum256([]byte(in))
		want := base32.StdEncoding.EncodeToString(sum[:])[:16]
		if got := hash16(in); got != want {
			t.Errorf("hash16(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIsServiceChainName(t *testing.T) {
	for chain, want := range map[string]bool{
		"KUBE-SVC-XPGD46QRK7WJZT7O": true, "KUBE-SVL-X": true, "KUBE-EXT-X": true, "KUBE-FW-X": true,
		"KUBE-SEP-X": true, "KUBE-SERVICES": false, "KUBE-NODEPORTS": false, "KUBE-FIREWALL": false,
		"KUBE-MARK-MASQ": false, "FOO": false,
	} {
		if got := isServiceChainName(chain); got != want {
			t.Errorf("isServiceChainName(%q) = %v, want %v", chain, got, want)
		}
	}
}
