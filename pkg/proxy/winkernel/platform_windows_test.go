//go:build windows

package winkernel

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/Microsoft/hnslib/hcn"
	"github.com/google/go-cmp/cmp"

	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
)

// mockHcn is an in-memory HcnService, enough to check the adapter's
// conversions without HNS.
type mockHcn struct {
	next    int
	network *hcn.HostComputeNetwork
	eps     map[string]*hcn.HostComputeEndpoint
	lbs     map[string]*hcn.HostComputeLoadBalancer
}

func newMockHcn() *mockHcn {
	settings, _ := json.Marshal(hcn.RemoteSubnetRoutePolicySetting{DestinationPrefix: "10.245.0.0/16", ProviderAddress: "192.168.0.3", IsolationId: 4096})
	return &mockHcn{
		network: &hcn.HostComputeNetwork{Id: "net-1", Name: "cbr0", Type: hcn.Overlay,
			Policies: []hcn.NetworkPolicy{{Type: hcn.RemoteSubnetRoute, Settings: settings}}},
		eps: map[string]*hcn.HostComputeEndpoint{},
		lbs: map[string]*hcn.HostComputeLoadBalancer{},
	}
}

func (m *mockHcn) id() string { m.next++; return fmt.Sprintf("id-%d", m.next) }

func (m *mockHcn) GetNetworkByName(name string) (*hcn.HostComputeNetwork, error) {
	if name != m.network.Name {
		return nil, hcn.NetworkNotFoundError{NetworkName: name}
	}
	return m.network, nil
}
func (m *mockHcn) GetNetworkByID(id string) (*hcn.HostComputeNetwork, error) {
	if id != m.network.Id {
		return nil, hcn.NetworkNotFoundError{NetworkID: id}
	}
	return m.network, nil
}
func (m *mockHcn) ListEndpoints() ([]hcn.HostComputeEndpoint, error) {
	return m.ListEndpointsOfNetwork("")
}
func (m *mockHcn) ListEndpointsOfNetwork(string) ([]hcn.HostComputeEndpoint, error) {
	var out []hcn.HostComputeEndpoint
	for _, ep := range m.eps {
		out = append(out, *ep)
	}
	return out, nil
}
func (m *mockHcn) GetEndpointByID(id string) (*hcn.HostComputeEndpoint, error) {
	if ep := m.eps[id]; ep != nil {
		return ep, nil
	}
	return nil, hcn.EndpointNotFoundError{EndpointID: id}
}
func (m *mockHcn) GetEndpointByName(name string) (*hcn.HostComputeEndpoint, error) {
	for _, ep := range m.eps {
		if ep.Name == name {
			return ep, nil
		}
	}
	return nil, hcn.EndpointNotFoundError{EndpointName: name}
}
func (m *mockHcn) CreateEndpoint(n *hcn.HostComputeNetwork, ep *hcn.HostComputeEndpoint) (*hcn.HostComputeEndpoint, error) {
	c := *ep
	c.Id, c.HostComputeNetwork = m.id(), n.Id
	m.eps[c.Id] = &c
	return &c, nil
}
func (m *mockHcn) CreateRemoteEndpoint(n *hcn.HostComputeNetwork, ep *hcn.HostComputeEndpoint) (*hcn.HostComputeEndpoint, error) {
	return m.CreateEndpoint(n, ep)
}
func (m *mockHcn) DeleteEndpoint(ep *hcn.HostComputeEndpoint) error { delete(m.eps, ep.Id); return nil }
func (m *mockHcn) ListLoadBalancers() ([]hcn.HostComputeLoadBalancer, error) {
	var out []hcn.HostComputeLoadBalancer
	for _, lb := range m.lbs {
		out = append(out, *lb)
	}
	return out, nil
}
func (m *mockHcn) GetLoadBalancerByID(id string) (*hcn.HostComputeLoadBalancer, error) {
	if lb := m.lbs[id]; lb != nil {
		return lb, nil
	}
	return nil, hcn.LoadBalancerNotFoundError{LoadBalancerId: id}
}
func (m *mockHcn) CreateLoadBalancer(lb *hcn.HostComputeLoadBalancer) (*hcn.HostComputeLoadBalancer, error) {
	c := *lb
	c.Id = m.id()
	m.lbs[c.Id] = &c
	return &c, nil
}
func (m *mockHcn) UpdateLoadBalancer(lb *hcn.HostComputeLoadBalancer, id string) (*hcn.HostComputeLoadBalancer, error) {
	c := *lb
	c.Id = id
	m.lbs[id] = &c
	return &c, nil
}
func (m *mockHcn) DeleteLoadBalancer(lb *hcn.HostComputeLoadBalancer) error {
	delete(m.lbs, lb.Id)
	return nil
}
func (m *mockHcn) GetSupportedFeatures() hcn.SupportedFeatures {
	return hcn.SupportedFeatures{Api: hcn.ApiSupport{V2: true}, ModifyLoadbalancer: true, SessionAffinity: true}
}
func (m *mockHcn) Ipv6DualStackSupported() error   { return nil }
func (m *mockHcn) DsrSupported() error             { return nil }
func (m *mockHcn) DeleteAllHnsLoadBalancerPolicy() { clear(m.lbs) }
func (m *mockHcn) RemoteSubnetSupported() error    { return nil }

var _ HcnService = &mockHcn{}

func TestAdapterConversions(t *testing.T) {
	a := hcnAdapter{svc: newMockHcn()}
	n, err := a.GetNetworkByName("cbr0")
	if err != nil {
		t.Fatal(err)
	}
	want := &hcnapi.Network{ID: "net-1", Name: "cbr0", Type: "Overlay",
		RemoteSubnets: []hcnapi.RemoteSubnet{{DestinationPrefix: "10.245.0.0/16", ProviderAddress: "192.168.0.3", IsolationID: 4096}}}
	if diff := cmp.Diff(want, n); diff != "" {
		t.Errorf("network (-want +got):\n%s", diff)
	}
	if _, err := a.GetNetworkByName("other"); !hcnapi.IsNetworkNotFound(err) {
		t.Errorf("missing network: %v (kind %v)", err, hcnapi.KindOf(err))
	}

	ep, err := a.CreateEndpoint(n.ID, &hcnapi.Endpoint{IPs: []string{"10.245.0.7"}, MAC: "02-11-0a-f5-00-07", Remote: true, ProviderAddress: "192.168.0.3"})
	if err != nil {
		t.Fatal(err)
	}
	eps, err := a.ListEndpointsOfNetwork(n.ID)
	if err != nil || len(eps) != 1 {
		t.Fatalf("list: %v %v", eps, err)
	}
	if diff := cmp.Diff(*ep, eps[0]); diff != "" {
		t.Errorf("endpoint round trip (-created +listed):\n%s", diff)
	}
	if !eps[0].Remote || eps[0].ProviderAddress != "192.168.0.3" {
		t.Errorf("remote flag or provider address lost: %+v", eps[0])
	}

	lb := &hcnapi.LoadBalancer{Endpoints: []string{ep.ID}, SourceVIP: "10.244.0.250", FrontendVIPs: []string{"10.96.0.1"},
		PortMappings: []hcnapi.PortMapping{{Protocol: 6, InternalPort: 8080, ExternalPort: 80, Distribution: hcnapi.DistributionSourceIP,
			Flags: hcnapi.PortMappingFlagsVipExternalIP | hcnapi.PortMappingFlagsLocalRoutedVIP}},
		Flags: hcnapi.LoadBalancerFlagsDSR | hcnapi.LoadBalancerFlagsIPv6}
	got, err := a.CreateLoadBalancer(lb)
	if err != nil {
		t.Fatal(err)
	}
	lb.ID = got.ID
	if diff := cmp.Diff(lb, got); diff != "" {
		t.Errorf("load balancer round trip (-want +got):\n%s", diff)
	}
	if err := a.DeleteLoadBalancer(got.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteLoadBalancer(got.ID); !hcnapi.IsNotFound(err) {
		t.Errorf("deleting twice: %v (kind %v)", err, hcnapi.KindOf(err))
	}
	f := a.Features()
	if !f.APIV2 || !f.DSR || !f.ModifyLoadbalancer || !f.IPv6DualStack || !f.RemoteSubnet {
		t.Errorf("features: %+v", f)
	}
	if uint32(LoadBalancerFlagsIPv6) != uint32(hcnapi.LoadBalancerFlagsIPv6) ||
		uint32(LoadBalancerPortMappingFlagsVipExternalIP) != uint32(hcnapi.PortMappingFlagsVipExternalIP) ||
		uint32(hcn.LoadBalancerPortMappingFlagsPreserveDIP) != uint32(hcnapi.PortMappingFlagsPreserveDIP) ||
		uint32(hcn.LoadBalancerDistributionSourceIP) != uint32(hcnapi.DistributionSourceIP) {
		t.Errorf("hcnapi's flag values differ from hcn's")
	}
}
