//go:build linux

package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"net"
	"strings"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"
)

// Object names inside the kube-proxy table. They are part of the compatibility
// contract (other components and operators read them), so they match upstream
// kube-proxy exactly; the table itself namespaces them, hence no "kube-" prefix.
const (
	kubeProxyTable = "kube-proxy"

	filterPreroutingPreDNATChain = "filter-prerouting-pre-dnat"
	filterOutputPreDNATChain     = "filter-output-pre-dnat"
	filterInputChain             = "filter-input"
	filterForwardChain           = "filter-forward"
	filterOutputChain            = "filter-output"
	natPreroutingChain           = "nat-prerouting"
	natOutputChain               = "nat-output"
	natPostroutingChain          = "nat-postrouting"

	servicesChain               = "services"
	serviceEndpointsCheckChain  = "service-endpoints-check"
	nodePortEndpointsCheckChain = "nodeport-endpoints-check"
	rejectChain                 = "reject-chain"
	clusterIPsCheckChain        = "cluster-ips-check"
	firewallCheckChain          = "firewall-check"
	masqueradingChain           = "masquerading"

	clusterIPsSet         = "cluster-ips"
	nodePortIPsSet        = "nodeport-ips"
	hairpinConnectionsSet = "hairpin-connections"

	serviceIPsMap              = "service-ips"
	serviceNodePortsMap        = "service-nodeports"
	noEndpointServicesMap      = "no-endpoint-services"
	noEndpointNodePortsMap     = "no-endpoint-nodeports"
	firewallIPsMap             = "firewall-ips"
	localhostNodePortRejectMap = "localhost-nodeport-reject-ports"
)

// Prefixes of the per-service and per-endpoint objects. All of them are followed
// by a base name that contains a "/", which is how stock objects are told apart
// from generated ones.
const (
	clusterPolicyChainPrefix = "service-"
	localPolicyChainPrefix   = "local-"
	externalChainPrefix      = "external-"
	endpointChainPrefix      = "endpoint-"
	affinitySetPrefix        = "affinity-"
	firewallChainPrefix      = "firewall-"

	// The longest prefix above plus slack; the base name gets the rest of
	// knftables.NameLengthMax.
	chainNamePrefixLengthMax = 16
	chainNameBaseLengthMax   = knftables.NameLengthMax - chainNamePrefixLengthMax
)

// localhostNodePortRejectChainName names the per-protocol chain that counts and
// rejects localhost NodePort traffic that kube-proxy does not serve.
func localhostNodePortRejectChainName(protocol v1.Protocol) string {
	return "localhost-nodeport-reject-" + strings.ToLower(string(protocol))
}

// hashedName prefixes name with 8 base32 characters of its SHA-256, so that
// names stay unique and visually distinct even when truncated.
func hashedName(name string) string {
	sum := sha256.Sum256([]byte(name))
	var enc [56]byte
	base32.StdEncoding.Encode(enc[:], sum[:])
	out := string(enc[:8]) + "-" + name
	if len(out) > chainNameBaseLengthMax {
		out = out[:chainNameBaseLengthMax-3] + "..."
	}
	return out
}

// servicePortBaseName is "<HASH8>-<ns>/<svc>/<proto>/<portName>". Namespace,
// service and port names are DNS labels and protocol is tcp/udp/sctp, so every
// part is legal in an nft identifier; "/" is the separator because none of the
// parts can contain it.
func servicePortBaseName(namespace, name, protocol, portName string) string {
	return hashedName(namespace + "/" + name + "/" + protocol + "/" + portName)
}

// endpointBaseName is the base name of an endpoint's chain and affinity set:
// "<HASH8>-<ns>/<svc>/<proto>/<portName>__<ip>/<port>". IPv6 colons are not
// legal in identifiers and become dots.
func endpointBaseName(namespace, name, protocol, portName, endpoint string) string {
	ip, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		// Not "ip:port"; keep the whole string so the name stays unique.
		ip = endpoint
	}
	ip = strings.ReplaceAll(ip, ":", ".")
	return hashedName(namespace + "/" + name + "/" + protocol + "/" + portName + "__" + ip + "/" + port)
}

// isServiceChainName reports whether chain is one of the generated
// per-service/per-endpoint chains (stock chain names never contain "/").
func isServiceChainName(chain string) bool {
	return strings.Contains(chain, "/")
}

func isAffinitySetName(set string) bool {
	return strings.HasPrefix(set, affinitySetPrefix)
}

// truncateComment keeps element comments within what nft accepts; they are
// cosmetic, so cutting them changes no behaviour.
func truncateComment(s string) string {
	if len(s) > knftables.CommentLengthMax {
		return s[:knftables.CommentLengthMax]
	}
	return s
}
