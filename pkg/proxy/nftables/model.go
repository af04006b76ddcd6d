package nftables

import (
	"net"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/proxy"
)

// container identifies one of the sets/maps whose elements the proxier owns.
type container uint8

const (
	cClusterIPs container = iota
	cServiceIPs
	cFirewallIPs
	cNoEndpointServices
	cNoEndpointNodePorts
	cServiceNodePorts
	cHairpin
	cLocalhostReject
	numContainers
)

var containerNames = [numContainers]string{
	cClusterIPs:          clusterIPsSet,
	cServiceIPs:          serviceIPsMap,
	cFirewallIPs:         firewallIPsMap,
	cNoEndpointServices:  noEndpointServicesMap,
	cNoEndpointNodePorts: noEndpointNodePortsMap,
	cServiceNodePorts:    serviceNodePortsMap,
	cHairpin:             hairpinConnectionsSet,
	cLocalhostReject:     localhostNodePortRejectMap,
}

func (c container) isSet() bool { return c == cClusterIPs || c == cHairpin }

func (c container) kind() string {
	if c.isSet() {
		return "set"
	}
	return "map"
}

// element builds the knftables object for key/value (both joined with " . ",
// which is also how nft prints them, so parsing back is unambiguous).
func (c container) element(key, value string, comment *string) *knftables.Element {
	e := &knftables.Element{Key: strings.Split(key, " . "), Comment: comment}
	if c.isSet() {
		e.Set = containerNames[c]
	} else {
		e.Map = containerNames[c]
		e.Value = strings.Split(value, " . ")
	}
	return e
}

// endpointModel is the backend-facing view of one endpoint.
type endpointModel struct {
	ip       string
	port     int
	local    bool
	endpoint string // "ip:port", IPv6 bracketed

	chain       string // only used with session affinity
	affinitySet string
}

func newEndpointModel(namespace, name, protocol, portName, ip string, port int, local bool) *endpointModel {
	ep := net.JoinHostPort(ip, strconv.Itoa(port))
	base := endpointBaseName(namespace, name, protocol, portName, ep)
	return &endpointModel{
		ip:          ip,
		port:        port,
		local:       local,
		endpoint:    ep,
		chain:       endpointChainPrefix + base,
		affinitySet: affinitySetPrefix + base,
	}
}

// serviceModel is everything the rule generator needs to know about one
// service port, already resolved by the brain (policies, topology, terminating
// fallback). Keeping it free of pkg/proxy types keeps generation testable and
// cheap to compare.
type serviceModel struct {
	owner    string // ServicePortName.String(); unique per service port
	name     proxy.ServicePortName
	protocol string // lower case

	clusterIP    string
	port         int
	nodePort     int
	externalIPs  []string
	lbVIPs       []string
	sourceRanges []*net.IPNet

	affinity      bool
	stickySeconds int

	externalPolicyLocal  bool
	internalPolicyLocal  bool
	externallyAccessible bool
	usesClusterEndpoints bool
	usesLocalEndpoints   bool

	clusterEndpoints   []*endpointModel
	localEndpoints     []*endpointModel
	reachableEndpoints []*endpointModel
	hasEndpoints       bool

	clusterChain  string
	localChain    string
	externalChain string
	firewallChain string

	// rejectLocalhostNodePort is set when kube-proxy rejects (and counts)
	// localhost traffic to this NodePort instead of serving it.
	rejectLocalhostNodePort bool
}

func newServiceChains(m *serviceModel, namespace, name, portName string) {
	base := servicePortBaseName(namespace, name, m.protocol, portName)
	m.clusterChain = clusterPolicyChainPrefix + base
	m.localChain = localPolicyChainPrefix + base
	m.externalChain = externalChainPrefix + base
	m.firewallChain = firewallChainPrefix + base
}

type ruleSpec struct {
	rule    string
	comment *string
}

type chainSpec struct {
	name  string
	rules []ruleSpec
}

func (c *chainSpec) equal(o *chainSpec) bool {
	if c == nil || o == nil || len(c.rules) != len(o.rules) {
		return false
	}
	for i := range c.rules {
		a, b := c.rules[i], o.rules[i]
		if a.rule != b.rule || (a.comment == nil) != (b.comment == nil) || (a.comment != nil && *a.comment != *b.comment) {
			return false
		}
	}
	return true
}

type setSpec struct {
	name    string
	timeout time.Duration
}

type elemSpec struct {
	c       container
	key     string
	value   string
	comment *string
}

// serviceRules is what one service port contributes to the table.
type serviceRules struct {
	chains []chainSpec
	sets   []setSpec
	elems  []elemSpec

	noLocalInternal bool
	noLocalExternal bool
}
