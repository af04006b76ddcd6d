//go:build linux

package nftables

import (
	"net"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/proxy"
)

// container identifies one of the sets/maps whose elements the proxier owns
// (endpoint maps are kept apart, see slots.go).
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

	// What the endpoint chain and affinity set names derive from. The
	// names are only needed with session affinity, so they are hashed on
	// first use: for 100k endpoints, computing them all up front costs
	// ~12 MiB and a hash each.
	namespace, name, protocol, portName string
	names                               *endpointNames
}

type endpointNames struct {
	chain       string
	affinitySet string
}

// lazyNames computes the endpoint's chain and affinity set names once. The
// models are only used by the sync that holds the proxier's lock.
func (e *endpointModel) lazyNames() *endpointNames {
	if e.names == nil {
		base := endpointBaseName(e.namespace, e.name, e.protocol, e.portName, e.endpoint)
		e.names = &endpointNames{chain: endpointChainPrefix + base, affinitySet: affinitySetPrefix + base}
	}
	return e.names
}

// chain is the endpoint's chain (used only with session affinity).
func (e *endpointModel) chain() string { return e.lazyNames().chain }

// affinitySet is the endpoint's affinity set.
func (e *endpointModel) affinitySet() string { return e.lazyNames().affinitySet }

// serviceModel is everything the rule generator needs to know about one
// service port, already resolved by the brain (policies, topology, terminating
// fallback). Keeping it free of pkg/proxy types keeps generation testable and
// cheap to compare.
type serviceModel struct {
	owner    string // ServicePortName.String(); unique per service port
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
	// usesCluster and usesLocal say which endpoint sets some traffic is
	// balanced over; internal and external what the brain decided for
	// traffic without a usable endpoint (proxy.ResolveTrafficPolicy).
	usesCluster, usesLocal bool
	internal, external     proxy.NoEndpointsAction

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

func newServiceChains(svc *serviceModel, namespace, name, portName string) {
	base := servicePortBaseName(namespace, name, svc.protocol, portName)
	svc.clusterChain = clusterPolicyChainPrefix + base
	svc.localChain = localPolicyChainPrefix + base
	svc.externalChain = externalChainPrefix + base
	svc.firewallChain = firewallChainPrefix + base
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
	return c != nil && o != nil && slices.EqualFunc(c.rules, o.rules, func(a, b ruleSpec) bool {
		return a.rule == b.rule && ptr.Equal(a.comment, b.comment)
	})
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
	// slots are the endpoint map ranges of the policy chains.
	slots []slotSpec
}
