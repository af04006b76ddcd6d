//go:build linux

package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	utiliptables "k8s.io/net-utils/iptables"
)

// Chain names are part of the node's state that outlives the process: they
// must be byte-identical to upstream kube-proxy's so that replacing one binary
// by the other finds, reuses and cleans up the same chains.
const (
	kubeServicesChain         utiliptables.Chain = "KUBE-SERVICES"
	kubeExternalServicesChain utiliptables.Chain = "KUBE-EXTERNAL-SERVICES"
	kubeNodePortsChain        utiliptables.Chain = "KUBE-NODEPORTS"
	kubePostroutingChain      utiliptables.Chain = "KUBE-POSTROUTING"
	kubeMarkMasqChain         utiliptables.Chain = "KUBE-MARK-MASQ"
	kubeForwardChain          utiliptables.Chain = "KUBE-FORWARD"
	kubeProxyFirewallChain    utiliptables.Chain = "KUBE-PROXY-FIREWALL"
	kubeProxyCanaryChain      utiliptables.Chain = "KUBE-PROXY-CANARY"

	// kubeletFirewallChain belongs to kubelet; kube-proxy writes the same
	// anti-martian rule into it when it enables route_localnet, so the
	// protection exists even if kubelet has not started yet. It is never
	// deleted by cleanup.
	kubeletFirewallChain utiliptables.Chain = "KUBE-FIREWALL"
)

// The top-level chains every restore that writes them declares, per table.
var (
	filterTopChains = [...]utiliptables.Chain{kubeServicesChain, kubeExternalServicesChain, kubeForwardChain, kubeNodePortsChain, kubeProxyFirewallChain}
	natTopChains    = [...]utiliptables.Chain{kubeServicesChain, kubeNodePortsChain, kubePostroutingChain, kubeMarkMasqChain}
)

const (
	svcChainPrefix = "KUBE-SVC-" // dispatch to endpoints, Cluster policy
	svlChainPrefix = "KUBE-SVL-" // dispatch to endpoints, Local policy
	fwChainPrefix  = "KUBE-FW-"  // loadBalancerSourceRanges filter
	extChainPrefix = "KUBE-EXT-" // external traffic (NodePort, LB, externalIP)
	sepChainPrefix = "KUBE-SEP-" // one endpoint
)

var servicePrefixes = [...]string{svcChainPrefix, svlChainPrefix, fwChainPrefix, extChainPrefix, sepChainPrefix}

// isServiceChainName reports whether a chain is one of the per-service or
// per-endpoint chains this proxier creates (and may therefore delete).
func isServiceChainName(chain string) bool {
	for _, p := range servicePrefixes {
		if strings.HasPrefix(chain, p) {
			return true
		}
	}
	return false
}

// hash16 returns the first 16 characters of the padded standard base32
// encoding of SHA-256(parts...). Sixteen base32 characters encode exactly the
// first ten digest bytes, so only those are encoded.
func hash16(parts ...string) string {
	var stack [256]byte
	b := stack[:0]
	for _, p := range parts {
		b = append(b, p...)
	}
	sum := sha256.Sum256(b)
	var out [16]byte
	base32.StdEncoding.Encode(out[:], sum[:10])
	return string(out[:])
}

// serviceChainHash is shared by the SVC, SVL, EXT and FW chains of one
// service port: servicePortName is ServicePortName.String() and protocol is
// lower case ("tcp").
func serviceChainHash(servicePortName, protocol string) string {
	return hash16(servicePortName, protocol)
}

// endpointChainName names the SEP chain of endpoint ("ip:port", IPv6
// bracketed) of a service port.
func endpointChainName(servicePortName, protocol, endpoint string) utiliptables.Chain {
	return utiliptables.Chain(sepChainPrefix + hash16(servicePortName, protocol, endpoint))
}
