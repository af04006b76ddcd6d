package hcnapi

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Network types the proxier handles (hcn.NetworkType values, compared
// case-insensitively as HNS reports them in varying case).
const (
	NetworkTypeOverlay  = "overlay"
	NetworkTypeL2Bridge = "L2Bridge"
)

// Network is an HNS network: only what the proxier reads.
type Network struct {
	ID   string
	Name string
	Type string
	// RemoteSubnets are the network's RemoteSubnetRoute policies (overlay):
	// which provider address (node) hosts which pod subnet.
	RemoteSubnets []RemoteSubnet
}

// RemoteSubnet is one RemoteSubnetRoute policy of a network.
type RemoteSubnet struct {
	DestinationPrefix string
	IsolationID       uint16
	ProviderAddress   string
	DRMacAddress      string
}

// IsOverlay reports whether n is an overlay (VXLAN) network.
func (n *Network) IsOverlay() bool { return strings.EqualFold(n.Type, NetworkTypeOverlay) }

// Endpoint is an HNS endpoint.
type Endpoint struct {
	ID        string
	Name      string
	NetworkID string
	// IPs are the endpoint's IP configurations; a dual-stack pod has one of
	// each family.
	IPs []string
	MAC string
	// Remote marks an endpoint standing for an address on another host
	// (hcn.EndpointFlagsRemoteEndpoint).
	Remote bool
	// ProviderAddress is the address of the host behind a remote endpoint on
	// an overlay network (a ProviderAddress endpoint policy); empty otherwise.
	ProviderAddress string
}

// LoadBalancerFlags are hcn.LoadBalancerFlags, same values.
type LoadBalancerFlags uint32

const (
	LoadBalancerFlagsNone LoadBalancerFlags = 0
	LoadBalancerFlagsDSR  LoadBalancerFlags = 1
	LoadBalancerFlagsIPv6 LoadBalancerFlags = 2
)

// PortMappingFlags are hcn.LoadBalancerPortMappingFlags, same values.
type PortMappingFlags uint32

const (
	PortMappingFlagsNone           PortMappingFlags = 0
	PortMappingFlagsILB            PortMappingFlags = 1
	PortMappingFlagsLocalRoutedVIP PortMappingFlags = 2
	PortMappingFlagsUseMux         PortMappingFlags = 4
	PortMappingFlagsPreserveDIP    PortMappingFlags = 8
	PortMappingFlagsVipExternalIP  PortMappingFlags = 16
)

// Distribution is hcn.LoadBalancerDistribution, same values.
type Distribution uint32

const (
	DistributionNone             Distribution = 0
	DistributionSourceIPProtocol Distribution = 1
	DistributionSourceIP         Distribution = 2
)

// PortMapping is one port mapping of a load balancer. The proxier always
// writes exactly one.
type PortMapping struct {
	Protocol     uint32
	InternalPort uint16
	ExternalPort uint16
	Distribution Distribution
	Flags        PortMappingFlags
}

// LoadBalancer is an HNS load balancer (a "load balancer policy").
type LoadBalancer struct {
	ID string
	// Endpoints are HNS endpoint IDs.
	Endpoints    []string
	SourceVIP    string
	FrontendVIPs []string
	PortMappings []PortMapping
	Flags        LoadBalancerFlags
}

// IsIPv6 reports whether lb carries the IPv6 flag, which is how the two
// single-stack proxiers of a dual-stack node tell their load balancers apart.
func (lb *LoadBalancer) IsIPv6() bool { return lb.Flags&LoadBalancerFlagsIPv6 != 0 }

// VIP returns the first frontend VIP, "" for a node port load balancer.
func (lb *LoadBalancer) VIP() string {
	if len(lb.FrontendVIPs) == 0 {
		return ""
	}
	return lb.FrontendVIPs[0]
}

// Clone returns a deep copy of lb.
func (lb *LoadBalancer) Clone() *LoadBalancer {
	c := *lb
	c.Endpoints = slices.Clone(lb.Endpoints)
	c.FrontendVIPs = slices.Clone(lb.FrontendVIPs)
	c.PortMappings = slices.Clone(lb.PortMappings)
	return &c
}

// Clone returns a deep copy of ep.
func (ep *Endpoint) Clone() *Endpoint {
	c := *ep
	c.IPs = slices.Clone(ep.IPs)
	return &c
}

// Clone returns a deep copy of n.
func (n *Network) Clone() *Network {
	c := *n
	c.RemoteSubnets = slices.Clone(n.RemoteSubnets)
	return &c
}

// Features are the HNS capabilities the proxier asks about.
type Features struct {
	// APIV2 is HNS's v2 API, which the proxier requires.
	APIV2 bool
	// DSR: direct server return load balancers.
	DSR bool
	// RemoteSubnet: RemoteSubnetRoute policies, which overlay networks need.
	RemoteSubnet bool
	// IPv6DualStack: dual-stack networking.
	IPv6DualStack bool
	// SessionAffinity: source-IP distribution.
	SessionAffinity bool
	// ModifyLoadbalancer: a load balancer's endpoints can be replaced in
	// place instead of deleting and re-creating it.
	ModifyLoadbalancer bool
}

// Interface is what the proxier needs from HNS. Implementations: the
// winkernel package's Windows adapter over hnslib, and the fake in
// pkg/proxy/winkernel/testing. Errors should be classified with the Kind
// helpers below (an *Error), so callers take the same paths on both.
type Interface interface {
	GetNetworkByName(name string) (*Network, error)
	ListEndpointsOfNetwork(networkID string) ([]Endpoint, error)
	GetEndpointByName(name string) (*Endpoint, error)
	// CreateEndpoint creates ep on the network; a Remote one as a remote
	// endpoint (with its ProviderAddress as a policy when set).
	CreateEndpoint(networkID string, ep *Endpoint) (*Endpoint, error)
	DeleteEndpoint(id string) error
	ListLoadBalancers() ([]LoadBalancer, error)
	CreateLoadBalancer(lb *LoadBalancer) (*LoadBalancer, error)
	// UpdateLoadBalancer replaces the load balancer id with lb (HNS's
	// ModifyLoadbalancer; an error of kind NotImplemented where missing).
	UpdateLoadBalancer(id string, lb *LoadBalancer) (*LoadBalancer, error)
	// DeleteLoadBalancer deletes a load balancer; one that does not exist
	// gives an error of kind NotFound.
	DeleteLoadBalancer(id string) error
	Features() Features
}

// ErrorKind classifies an HNS error the way the proxier acts on it (the
// hcn.Is*Error predicates).
type ErrorKind int

const (
	KindOther ErrorKind = iota
	// KindNotFound: the object asked for does not exist (hcn.IsNotFoundError).
	KindNotFound
	// KindNetworkNotFound: HCN_E_NETWORK_NOT_FOUND.
	KindNetworkNotFound
	// KindPortAlreadyExists: HCN_E_PORT_ALREADY_EXISTS, a load balancer
	// with the same frontend exists.
	KindPortAlreadyExists
	// KindNotImplemented: E_NOTIMPL, for example updating a load balancer
	// on a Windows version without ModifyLoadbalancer.
	KindNotImplemented
	// KindInvalidIP: HCN_E_INVALID_IP.
	KindInvalidIP
)

// Error is an HNS error with its kind. Error() is the underlying message
// unchanged, because callers also match HRESULT codes in it (0x6b5: the HNS
// service is not running).
type Error struct {
	Kind ErrorKind
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// NewError returns an *Error of kind with message msg.
func NewError(kind ErrorKind, msg string) error { return &Error{Kind: kind, Err: errors.New(msg)} }

// Errorf is NewError with formatting; %w wraps.
func Errorf(kind ErrorKind, format string, args ...any) error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// KindOf returns the kind of the first *Error in err's chain, KindOther if
// there is none.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindOther
}

// IsNotFound reports whether err says an object does not exist.
func IsNotFound(err error) bool { return err != nil && KindOf(err) == KindNotFound }

// IsNetworkNotFound reports whether err says the network does not exist.
func IsNetworkNotFound(err error) bool { return err != nil && KindOf(err) == KindNetworkNotFound }

// IsPortAlreadyExists reports whether err is HCN_E_PORT_ALREADY_EXISTS.
func IsPortAlreadyExists(err error) bool { return err != nil && KindOf(err) == KindPortAlreadyExists }

// IsNotImplemented reports whether err is E_NOTIMPL.
func IsNotImplemented(err error) bool { return err != nil && KindOf(err) == KindNotImplemented }

// IsInvalidIP reports whether err is HCN_E_INVALID_IP.
func IsInvalidIP(err error) bool { return err != nil && KindOf(err) == KindInvalidIP }

// HNS HRESULT codes the proxier looks for in error messages, as upstream
// does: hnslib reports them only in the text.
const (
	// ErrorCodeHNSNotRunning is ERROR_SERVICE_NOT_ACTIVE.
	ErrorCodeHNSNotRunning = "0x6b5"
	// ErrorCodeFileAlreadyExists is ERROR_ALREADY_EXISTS.
	ErrorCodeFileAlreadyExists = "0xb7"
)

// IsHNSNotRunning reports whether err says the HNS service is not running.
func IsHNSNotRunning(err error) bool {
	return err != nil && strings.Contains(err.Error(), ErrorCodeHNSNotRunning)
}
