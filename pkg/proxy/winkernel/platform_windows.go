//go:build windows

package winkernel

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/Microsoft/hnslib"
	"github.com/Microsoft/hnslib/hcn"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
)

// LoadBalancerFlagsIPv6 and LoadBalancerPortMappingFlagsVipExternalIP are
// hcn flag values hnslib did not name when upstream needed them.
var (
	LoadBalancerFlagsIPv6                     hcn.LoadBalancerFlags            = 2
	LoadBalancerPortMappingFlagsVipExternalIP hcn.LoadBalancerPortMappingFlags = 16
)

// HcnService is hnslib's hcn API as the proxier uses it (upstream's
// interface). The proxier reaches it through an adapter onto hcnapi.
type HcnService interface {
	// Network functions
	GetNetworkByName(networkName string) (*hcn.HostComputeNetwork, error)
	GetNetworkByID(networkID string) (*hcn.HostComputeNetwork, error)
	// Endpoint functions
	ListEndpoints() ([]hcn.HostComputeEndpoint, error)
	ListEndpointsOfNetwork(networkId string) ([]hcn.HostComputeEndpoint, error)
	GetEndpointByID(endpointId string) (*hcn.HostComputeEndpoint, error)
	GetEndpointByName(endpointName string) (*hcn.HostComputeEndpoint, error)
	CreateEndpoint(network *hcn.HostComputeNetwork, endpoint *hcn.HostComputeEndpoint) (*hcn.HostComputeEndpoint, error)
	CreateRemoteEndpoint(network *hcn.HostComputeNetwork, endpoint *hcn.HostComputeEndpoint) (*hcn.HostComputeEndpoint, error)
	DeleteEndpoint(endpoint *hcn.HostComputeEndpoint) error
	// LoadBalancer functions
	ListLoadBalancers() ([]hcn.HostComputeLoadBalancer, error)
	GetLoadBalancerByID(loadBalancerId string) (*hcn.HostComputeLoadBalancer, error)
	CreateLoadBalancer(loadBalancer *hcn.HostComputeLoadBalancer) (*hcn.HostComputeLoadBalancer, error)
	UpdateLoadBalancer(loadBalancer *hcn.HostComputeLoadBalancer, hnsID string) (*hcn.HostComputeLoadBalancer, error)
	DeleteLoadBalancer(loadBalancer *hcn.HostComputeLoadBalancer) error
	// Features functions
	GetSupportedFeatures() hcn.SupportedFeatures
	Ipv6DualStackSupported() error
	DsrSupported() error
	// Policy functions
	DeleteAllHnsLoadBalancerPolicy()
	RemoteSubnetSupported() error
}

// hcnImpl calls hnslib.
type hcnImpl struct{}

var _ HcnService = hcnImpl{}

func (hcnImpl) GetNetworkByName(name string) (*hcn.HostComputeNetwork, error) {
	return hcn.GetNetworkByName(name)
}
func (hcnImpl) GetNetworkByID(id string) (*hcn.HostComputeNetwork, error) {
	return hcn.GetNetworkByID(id)
}
func (hcnImpl) ListEndpoints() ([]hcn.HostComputeEndpoint, error) { return hcn.ListEndpoints() }
func (hcnImpl) ListEndpointsOfNetwork(id string) ([]hcn.HostComputeEndpoint, error) {
	return hcn.ListEndpointsOfNetwork(id)
}
func (hcnImpl) GetEndpointByID(id string) (*hcn.HostComputeEndpoint, error) {
	return hcn.GetEndpointByID(id)
}
func (hcnImpl) GetEndpointByName(name string) (*hcn.HostComputeEndpoint, error) {
	return hcn.GetEndpointByName(name)
}
func (hcnImpl) CreateEndpoint(n *hcn.HostComputeNetwork, ep *hcn.HostComputeEndpoint) (*hcn.HostComputeEndpoint, error) {
	return n.CreateEndpoint(ep)
}
func (hcnImpl) CreateRemoteEndpoint(n *hcn.HostComputeNetwork, ep *hcn.HostComputeEndpoint) (*hcn.HostComputeEndpoint, error) {
	return n.CreateRemoteEndpoint(ep)
}
func (hcnImpl) DeleteEndpoint(ep *hcn.HostComputeEndpoint) error { return ep.Delete() }
func (hcnImpl) ListLoadBalancers() ([]hcn.HostComputeLoadBalancer, error) {
	return hcn.ListLoadBalancers()
}
func (hcnImpl) GetLoadBalancerByID(id string) (*hcn.HostComputeLoadBalancer, error) {
	return hcn.GetLoadBalancerByID(id)
}
func (hcnImpl) CreateLoadBalancer(lb *hcn.HostComputeLoadBalancer) (*hcn.HostComputeLoadBalancer, error) {
	return lb.Create()
}
func (hcnImpl) UpdateLoadBalancer(lb *hcn.HostComputeLoadBalancer, id string) (*hcn.HostComputeLoadBalancer, error) {
	return lb.Update(id)
}
func (hcnImpl) DeleteLoadBalancer(lb *hcn.HostComputeLoadBalancer) error { return lb.Delete() }
func (hcnImpl) GetSupportedFeatures() hcn.SupportedFeatures              { return hcn.GetSupportedFeatures() }
func (hcnImpl) Ipv6DualStackSupported() error                            { return hcn.IPv6DualStackSupported() }
func (hcnImpl) DsrSupported() error                                      { return hcn.DSRSupported() }
func (hcnImpl) RemoteSubnetSupported() error                             { return hcn.RemoteSubnetSupported() }

func (h hcnImpl) DeleteAllHnsLoadBalancerPolicy() {
	cleanupLoadBalancers(hcnAdapter{svc: h})
}

// newPlatformHCN returns the adapter over hnslib.
func newPlatformHCN() (hcnapi.Interface, error) { return hcnAdapter{svc: hcnImpl{}}, nil }

func isPortAlreadyExistsPlatform(err error) bool { return hcn.IsPortAlreadyExistsError(err) }

// IsCompatible checks that HNS answers a policy list request.
func (WindowsKernelCompatTester) IsCompatible() error {
	if _, err := hnslib.HNSListPolicyListRequest(); err != nil {
		return fmt.Errorf("Windows kernel is not compatible for Kernel mode: %w", err)
	}
	return nil
}

// DualStackCompatible reports whether HNS supports dual-stack and the
// network is not an overlay.
func (DualStackCompatTester) DualStackCompatible(networkName string) bool {
	return dualStackCompatible(hcnAdapter{svc: hcnImpl{}}, networkName)
}

// hcnAdapter is hcnapi.Interface over an HcnService: it converts hcn's
// types to the platform-neutral ones and classifies hcn's errors.
type hcnAdapter struct {
	svc HcnService
}

var _ hcnapi.Interface = hcnAdapter{}

// classify wraps err in an *hcnapi.Error of the kind hcn's predicates give.
func classify(err error) error {
	if err == nil {
		return nil
	}
	kind := hcnapi.KindOther
	var nnf hnslib.NetworkNotFoundError
	switch {
	case hcn.IsNetworkNotFoundError(err) || errors.As(err, &nnf):
		kind = hcnapi.KindNetworkNotFound
	case hcn.IsPortAlreadyExistsError(err):
		kind = hcnapi.KindPortAlreadyExists
	case hcn.IsNotImplemented(err):
		kind = hcnapi.KindNotImplemented
	case hcn.IsInvalidIPError(err):
		kind = hcnapi.KindInvalidIP
	case hcn.IsNotFoundError(err) || hcn.IsElementNotFoundError(err) || hcn.IsEndpointNotFoundError(err):
		kind = hcnapi.KindNotFound
	}
	if kind == hcnapi.KindNotFound {
		// A network looked up by name is reported with the shim's own type.
		var shim hcn.NetworkNotFoundError
		if errors.As(err, &shim) {
			kind = hcnapi.KindNetworkNotFound
		}
	}
	return &hcnapi.Error{Kind: kind, Err: err}
}

func (a hcnAdapter) GetNetworkByName(name string) (*hcnapi.Network, error) {
	n, err := a.svc.GetNetworkByName(name)
	if err != nil {
		return nil, classify(err)
	}
	out := &hcnapi.Network{ID: n.Id, Name: n.Name, Type: string(n.Type)}
	for _, policy := range n.Policies {
		if policy.Type != hcn.RemoteSubnetRoute {
			continue
		}
		var s hcn.RemoteSubnetRoutePolicySetting
		if err := json.Unmarshal(policy.Settings, &s); err != nil {
			return nil, fmt.Errorf("network %q: unmarshalling remote subnet policy settings: %w", name, err)
		}
		out.RemoteSubnets = append(out.RemoteSubnets, hcnapi.RemoteSubnet{
			DestinationPrefix: s.DestinationPrefix, IsolationID: s.IsolationId,
			ProviderAddress: s.ProviderAddress, DRMacAddress: s.DistributedRouterMacAddress,
		})
	}
	return out, nil
}

func endpointFromHCN(ep *hcn.HostComputeEndpoint) hcnapi.Endpoint {
	out := hcnapi.Endpoint{
		ID: ep.Id, Name: ep.Name, NetworkID: ep.HostComputeNetwork, MAC: ep.MacAddress,
		Remote: ep.Flags&hcn.EndpointFlagsRemoteEndpoint != 0,
	}
	for _, c := range ep.IpConfigurations {
		out.IPs = append(out.IPs, c.IpAddress)
	}
	for _, p := range ep.Policies {
		if p.Type == hcn.NetworkProviderAddress {
			var s hcn.ProviderAddressEndpointPolicySetting
			if json.Unmarshal(p.Settings, &s) == nil {
				out.ProviderAddress = s.ProviderAddress
			}
		}
	}
	return out
}

func (a hcnAdapter) ListEndpointsOfNetwork(networkID string) ([]hcnapi.Endpoint, error) {
	eps, err := a.svc.ListEndpointsOfNetwork(networkID)
	if err != nil {
		return nil, classify(err)
	}
	out := make([]hcnapi.Endpoint, 0, len(eps))
	for i := range eps {
		if len(eps[i].IpConfigurations) == 0 {
			klog.V(3).InfoS("Skipping HNS endpoint without IP configuration", "hnsID", eps[i].Id)
			continue
		}
		out = append(out, endpointFromHCN(&eps[i]))
	}
	return out, nil
}

func (a hcnAdapter) GetEndpointByName(name string) (*hcnapi.Endpoint, error) {
	ep, err := a.svc.GetEndpointByName(name)
	if err != nil {
		return nil, classify(err)
	}
	out := endpointFromHCN(ep)
	return &out, nil
}

func (a hcnAdapter) CreateEndpoint(networkID string, ep *hcnapi.Endpoint) (*hcnapi.Endpoint, error) {
	n, err := a.svc.GetNetworkByID(networkID)
	if err != nil {
		return nil, classify(err)
	}
	want := &hcn.HostComputeEndpoint{
		MacAddress:    ep.MAC,
		SchemaVersion: hcn.SchemaVersion{Major: 2, Minor: 0},
	}
	for _, ip := range ep.IPs {
		want.IpConfigurations = append(want.IpConfigurations, hcn.IpConfig{IpAddress: ip})
	}
	var created *hcn.HostComputeEndpoint
	if ep.Remote {
		want.Flags |= hcn.EndpointFlagsRemoteEndpoint
		if ep.ProviderAddress != "" {
			settings, err := json.Marshal(hcn.ProviderAddressEndpointPolicySetting{ProviderAddress: ep.ProviderAddress})
			if err != nil {
				return nil, fmt.Errorf("provider address policy for %v: %w", ep.IPs, err)
			}
			want.Policies = append(want.Policies, hcn.EndpointPolicy{Type: hcn.NetworkProviderAddress, Settings: settings})
		}
		created, err = a.svc.CreateRemoteEndpoint(n, want)
	} else {
		created, err = a.svc.CreateEndpoint(n, want)
	}
	if err != nil {
		return nil, classify(err)
	}
	out := endpointFromHCN(created)
	if out.ProviderAddress == "" {
		out.ProviderAddress = ep.ProviderAddress
	}
	return &out, nil
}

func (a hcnAdapter) DeleteEndpoint(id string) error {
	ep, err := a.svc.GetEndpointByID(id)
	if err != nil {
		return classify(err)
	}
	return classify(a.svc.DeleteEndpoint(ep))
}

func lbFromHCN(lb *hcn.HostComputeLoadBalancer) hcnapi.LoadBalancer {
	out := hcnapi.LoadBalancer{
		ID: lb.Id, Endpoints: lb.HostComputeEndpoints, SourceVIP: lb.SourceVIP,
		FrontendVIPs: lb.FrontendVIPs, Flags: hcnapi.LoadBalancerFlags(lb.Flags),
	}
	for _, pm := range lb.PortMappings {
		out.PortMappings = append(out.PortMappings, hcnapi.PortMapping{
			Protocol: pm.Protocol, InternalPort: pm.InternalPort, ExternalPort: pm.ExternalPort,
			Distribution: hcnapi.Distribution(pm.DistributionType), Flags: hcnapi.PortMappingFlags(pm.Flags),
		})
	}
	return out
}

func lbToHCN(lb *hcnapi.LoadBalancer) *hcn.HostComputeLoadBalancer {
	out := &hcn.HostComputeLoadBalancer{
		HostComputeEndpoints: lb.Endpoints, SourceVIP: lb.SourceVIP, FrontendVIPs: lb.FrontendVIPs,
		SchemaVersion: hcn.SchemaVersion{Major: 2, Minor: 0},
		Flags:         hcn.LoadBalancerFlags(lb.Flags),
	}
	if out.FrontendVIPs == nil {
		out.FrontendVIPs = []string{}
	}
	for _, pm := range lb.PortMappings {
		out.PortMappings = append(out.PortMappings, hcn.LoadBalancerPortMapping{
			Protocol: pm.Protocol, InternalPort: pm.InternalPort, ExternalPort: pm.ExternalPort,
			DistributionType: hcn.LoadBalancerDistribution(pm.Distribution), Flags: hcn.LoadBalancerPortMappingFlags(pm.Flags),
		})
	}
	return out
}

func (a hcnAdapter) ListLoadBalancers() ([]hcnapi.LoadBalancer, error) {
	lbs, err := a.svc.ListLoadBalancers()
	if err != nil {
		return nil, classify(err)
	}
	out := make([]hcnapi.LoadBalancer, 0, len(lbs))
	for i := range lbs {
		out = append(out, lbFromHCN(&lbs[i]))
	}
	return out, nil
}

func (a hcnAdapter) CreateLoadBalancer(lb *hcnapi.LoadBalancer) (*hcnapi.LoadBalancer, error) {
	got, err := a.svc.CreateLoadBalancer(lbToHCN(lb))
	if err != nil {
		return nil, classify(err)
	}
	out := lbFromHCN(got)
	return &out, nil
}

func (a hcnAdapter) UpdateLoadBalancer(id string, lb *hcnapi.LoadBalancer) (*hcnapi.LoadBalancer, error) {
	got, err := a.svc.UpdateLoadBalancer(lbToHCN(lb), id)
	if err != nil {
		return nil, classify(err)
	}
	out := lbFromHCN(got)
	return &out, nil
}

func (a hcnAdapter) DeleteLoadBalancer(id string) error {
	lb, err := a.svc.GetLoadBalancerByID(id)
	if err != nil {
		return classify(err)
	}
	return classify(a.svc.DeleteLoadBalancer(lb))
}

func (a hcnAdapter) Features() hcnapi.Features {
	sf := a.svc.GetSupportedFeatures()
	return hcnapi.Features{
		APIV2:              sf.Api.V2,
		DSR:                a.svc.DsrSupported() == nil,
		RemoteSubnet:       a.svc.RemoteSubnetSupported() == nil,
		IPv6DualStack:      a.svc.Ipv6DualStackSupported() == nil,
		SessionAffinity:    sf.SessionAffinity,
		ModifyLoadbalancer: sf.ModifyLoadbalancer,
	}
}
