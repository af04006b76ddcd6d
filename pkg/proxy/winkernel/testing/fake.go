// Package testing has an in-memory fake of the Host Compute Network service
// (hcnapi.Interface) for testing the winkernel proxier on any platform.
//
// The fake checks what real HNS checks that matters to the proxier: a load
// balancer's endpoints must exist, two load balancers cannot share a
// frontend (VIP, protocol, external port, family), an endpoint's address is
// unique on its network, and updating a load balancer needs the
// ModifyLoadbalancer feature. It counts calls per operation and can be told
// to fail the next calls of an operation, to stop (HNS not running), and to
// recreate a network under a new ID.
//
// Allowed imports: the standard library and hcnapi.
package testing

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
)

// Operation names, as counted by Calls and used by FailNext.
const (
	OpGetNetworkByName       = "GetNetworkByName"
	OpListEndpointsOfNetwork = "ListEndpointsOfNetwork"
	OpGetEndpointByName      = "GetEndpointByName"
	OpCreateEndpoint         = "CreateEndpoint"
	OpDeleteEndpoint         = "DeleteEndpoint"
	OpListLoadBalancers      = "ListLoadBalancers"
	OpCreateLoadBalancer     = "CreateLoadBalancer"
	OpUpdateLoadBalancer     = "UpdateLoadBalancer"
	OpDeleteLoadBalancer     = "DeleteLoadBalancer"
)

// HNSNotRunningError is what every call returns while the fake is stopped;
// its text carries ERROR_SERVICE_NOT_ACTIVE as hnslib's errors do.
var HNSNotRunningError = hcnapi.NewError(hcnapi.KindOther,
	"hnsCall failed in Win32: The service has not been started. ("+hcnapi.ErrorCodeHNSNotRunning+")")

// Fake is an in-memory HNS. The zero value is not usable; call NewFake.
type Fake struct {
	mu       sync.Mutex
	features hcnapi.Features
	stopped  bool
	nextID   int
	networks map[string]*hcnapi.Network // by name
	eps      map[string]*hcnapi.Endpoint
	lbs      map[string]*hcnapi.LoadBalancer
	calls    map[string]int
	failures map[string][]error
	// byIP counts endpoints per "networkID/IP"; byFrontend holds the load
	// balancer of each frontend. They keep the checks O(1), so benchmarks
	// at 10k Services measure the proxier, not the fake.
	byIP       map[string]int
	byFrontend map[frontend]string
}

type frontend struct {
	vip      string
	protocol uint32
	port     uint16
	ipv6     bool
}

func frontendOf(lb *hcnapi.LoadBalancer) (frontend, bool) {
	if len(lb.PortMappings) == 0 {
		return frontend{}, false
	}
	return frontend{vip: lb.VIP(), protocol: lb.PortMappings[0].Protocol, port: lb.PortMappings[0].ExternalPort, ipv6: lb.IsIPv6()}, true
}

func (f *Fake) putEP(ep *hcnapi.Endpoint) {
	f.eps[ep.ID] = ep
	for _, ip := range ep.IPs {
		f.byIP[strings.ToLower(ep.NetworkID)+"/"+ip]++
	}
}

func (f *Fake) dropEP(id string) {
	ep := f.eps[id]
	if ep == nil {
		return
	}
	delete(f.eps, id)
	for _, ip := range ep.IPs {
		k := strings.ToLower(ep.NetworkID) + "/" + ip
		if f.byIP[k]--; f.byIP[k] <= 0 {
			delete(f.byIP, k)
		}
	}
}

func (f *Fake) putLB(lb *hcnapi.LoadBalancer) {
	f.lbs[lb.ID] = lb
	if k, ok := frontendOf(lb); ok {
		f.byFrontend[k] = lb.ID
	}
}

func (f *Fake) dropLB(id string) {
	lb := f.lbs[id]
	if lb == nil {
		return
	}
	delete(f.lbs, id)
	if k, ok := frontendOf(lb); ok && f.byFrontend[k] == id {
		delete(f.byFrontend, k)
	}
}

var _ hcnapi.Interface = &Fake{}

// NewFake returns an empty fake HNS with the given features.
func NewFake(features hcnapi.Features) *Fake {
	return &Fake{
		features:   features,
		networks:   map[string]*hcnapi.Network{},
		eps:        map[string]*hcnapi.Endpoint{},
		lbs:        map[string]*hcnapi.LoadBalancer{},
		calls:      map[string]int{},
		failures:   map[string][]error{},
		byIP:       map[string]int{},
		byFrontend: map[frontend]string{},
	}
}

// AllFeatures is a current Windows Server's HNS.
func AllFeatures() hcnapi.Features {
	return hcnapi.Features{APIV2: true, DSR: true, RemoteSubnet: true, IPv6DualStack: true, SessionAffinity: true, ModifyLoadbalancer: true}
}

func (f *Fake) newID(prefix string) string {
	f.nextID++
	return fmt.Sprintf("%s-%04d", prefix, f.nextID)
}

// enter counts a call of op and returns the error it must fail with, if any.
func (f *Fake) enter(op string) error {
	f.calls[op]++
	if f.stopped {
		return HNSNotRunningError
	}
	if q := f.failures[op]; len(q) > 0 {
		f.failures[op] = q[1:]
		return q[0]
	}
	return nil
}

// FailNext makes the next len(errs) calls of op return errs, in order.
func (f *Fake) FailNext(op string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[op] = append(f.failures[op], errs...)
}

// ClearFailures drops every failure FailNext queued and no call consumed.
func (f *Fake) ClearFailures() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.failures)
}

// SetRunning stops (false) or restarts the HNS service: while stopped every
// call fails with HNSNotRunningError. Objects survive.
func (f *Fake) SetRunning(running bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = !running
}

// SetFeatures changes what Features reports.
func (f *Fake) SetFeatures(features hcnapi.Features) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.features = features
}

// Calls returns how many times each operation was called.
func (f *Fake) Calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.calls)
}

// TotalCalls returns the number of calls of every operation together.
func (f *Fake) TotalCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

// ResetCalls forgets the call counts.
func (f *Fake) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.calls)
}

// AddNetwork creates (or replaces) a network of the given type. It is what
// the CNI plugin does before kube-proxy starts.
func (f *Fake) AddNetwork(name, networkType string, remoteSubnets ...hcnapi.RemoteSubnet) *hcnapi.Network {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := &hcnapi.Network{ID: f.newID("net"), Name: name, Type: networkType, RemoteSubnets: slices.Clone(remoteSubnets)}
	f.networks[name] = n
	return n.Clone()
}

// SetRemoteSubnets replaces a network's RemoteSubnetRoute policies.
func (f *Fake) SetRemoteSubnets(name string, remoteSubnets ...hcnapi.RemoteSubnet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.networks[name]; n != nil {
		n.RemoteSubnets = slices.Clone(remoteSubnets)
	}
}

// RecreateNetwork deletes a network with all its endpoints and creates it
// again under a new ID, as an HNS restart or a CNI redeployment does. Load
// balancers are left as HNS leaves them: pointing at endpoints that are gone.
func (f *Fake) RecreateNetwork(name string) *hcnapi.Network {
	f.mu.Lock()
	old := f.networks[name]
	f.mu.Unlock()
	if old == nil {
		return nil
	}
	f.DeleteNetwork(name)
	return f.AddNetwork(name, old.Type, old.RemoteSubnets...)
}

// DeleteNetwork deletes a network and its endpoints.
func (f *Fake) DeleteNetwork(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.networks[name]
	if n == nil {
		return
	}
	delete(f.networks, name)
	for id, ep := range f.eps {
		if ep.NetworkID == n.ID {
			f.dropEP(id)
		}
	}
}

// AddEndpoint inserts an endpoint as the CNI plugin (local ones) or an
// earlier kube-proxy (remote ones) would have, without the duplicate-address
// check, so tests can also build the duplicates Windows Server 2019 makes.
// It returns the endpoint with its new ID.
func (f *Fake) AddEndpoint(networkName string, ep hcnapi.Endpoint) *hcnapi.Endpoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.networks[networkName]
	if n == nil {
		panic(fmt.Sprintf("fake HNS: AddEndpoint on unknown network %q", networkName))
	}
	c := ep.Clone()
	c.ID = f.newID("ep")
	c.NetworkID = n.ID
	f.putEP(c)
	return c.Clone()
}

// AddLoadBalancer inserts a load balancer without checks, as a leftover of
// an earlier kube-proxy.
func (f *Fake) AddLoadBalancer(lb hcnapi.LoadBalancer) *hcnapi.LoadBalancer {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := lb.Clone()
	c.ID = f.newID("lb")
	f.putLB(c)
	return c.Clone()
}

// Endpoints returns every endpoint, sorted by ID.
func (f *Fake) Endpoints() []hcnapi.Endpoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]hcnapi.Endpoint, 0, len(f.eps))
	for _, id := range slices.Sorted(maps.Keys(f.eps)) {
		out = append(out, *f.eps[id].Clone())
	}
	return out
}

// EndpointByID returns an endpoint, nil if there is none.
func (f *Fake) EndpointByID(id string) *hcnapi.Endpoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ep := f.eps[id]; ep != nil {
		return ep.Clone()
	}
	return nil
}

// LoadBalancers returns every load balancer, sorted by ID.
func (f *Fake) LoadBalancers() []hcnapi.LoadBalancer {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]hcnapi.LoadBalancer, 0, len(f.lbs))
	for _, id := range slices.Sorted(maps.Keys(f.lbs)) {
		out = append(out, *f.lbs[id].Clone())
	}
	return out
}

// GetNetworkByName implements hcnapi.Interface.
func (f *Fake) GetNetworkByName(name string) (*hcnapi.Network, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(OpGetNetworkByName); err != nil {
		return nil, err
	}
	n := f.networks[name]
	if n == nil {
		return nil, hcnapi.Errorf(hcnapi.KindNetworkNotFound, "Network name %q not found", name)
	}
	return n.Clone(), nil
}

func (f *Fake) networkByID(id string) *hcnapi.Network {
	for _, n := range f.networks {
		if strings.EqualFold(n.ID, id) {
			return n
		}
	}
	return nil
}

// ListEndpointsOfNetwork implements hcnapi.Interface.
func (f *Fake) ListEndpointsOfNetwork(networkID string) ([]hcnapi.Endpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(OpListEndpointsOfNetwork); err != nil {
		return nil, err
	}
	if f.networkByID(networkID) == nil {
		return nil, hcnapi.Errorf(hcnapi.KindNetworkNotFound, "Network %q not found", networkID)
	}
	var out []hcnapi.Endpoint
	for _, id := range slices.Sorted(maps.Keys(f.eps)) {
		if ep := f.eps[id]; strings.EqualFold(ep.NetworkID, networkID) {
			out = append(out, *ep.Clone())
		}
	}
	return out, nil
}

// GetEndpointByName implements hcnapi.Interface.
func (f *Fake) GetEndpointByName(name string) (*hcnapi.Endpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(OpGetEndpointByName); err != nil {
		return nil, err
	}
	for _, id := range slices.Sorted(maps.Keys(f.eps)) {
		if f.eps[id].Name == name {
			return f.eps[id].Clone(), nil
		}
	}
	return nil, hcnapi.Errorf(hcnapi.KindNotFound, "Endpoint name %q not found", name)
}

// CreateEndpoint implements hcnapi.Interface.
func (f *Fake) CreateEndpoint(networkID string, ep *hcnapi.Endpoint) (*hcnapi.Endpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(OpCreateEndpoint); err != nil {
		return nil, err
	}
	if f.networkByID(networkID) == nil {
		return nil, hcnapi.Errorf(hcnapi.KindNetworkNotFound, "Network %q not found", networkID)
	}
	if len(ep.IPs) == 0 {
		return nil, hcnapi.Errorf(hcnapi.KindInvalidIP, "endpoint without an IP configuration")
	}
	for _, ip := range ep.IPs {
		if f.byIP[strings.ToLower(networkID)+"/"+ip] > 0 {
			return nil, hcnapi.Errorf(hcnapi.KindOther, "endpoint with IP %s already exists (%s)", ip, hcnapi.ErrorCodeFileAlreadyExists)
		}
	}
	c := ep.Clone()
	c.ID = f.newID("ep")
	c.NetworkID = networkID
	f.putEP(c)
	return c.Clone(), nil
}

// DeleteEndpoint implements hcnapi.Interface.
func (f *Fake) DeleteEndpoint(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(OpDeleteEndpoint); err != nil {
		return err
	}
	if f.eps[id] == nil {
		return hcnapi.Errorf(hcnapi.KindNotFound, "Endpoint %q not found", id)
	}
	f.dropEP(id)
	return nil
}

// ListLoadBalancers implements hcnapi.Interface.
func (f *Fake) ListLoadBalancers() ([]hcnapi.LoadBalancer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(OpListLoadBalancers); err != nil {
		return nil, err
	}
	out := make([]hcnapi.LoadBalancer, 0, len(f.lbs))
	for _, id := range slices.Sorted(maps.Keys(f.lbs)) {
		out = append(out, *f.lbs[id].Clone())
	}
	return out, nil
}

// check validates lb as HNS would; skip is the ID of the load balancer an
// update replaces.
func (f *Fake) check(lb *hcnapi.LoadBalancer, skip string) error {
	if len(lb.PortMappings) != 1 {
		return hcnapi.Errorf(hcnapi.KindOther, "load balancer needs one port mapping, has %d", len(lb.PortMappings))
	}
	for _, id := range lb.Endpoints {
		if f.eps[id] == nil {
			return hcnapi.Errorf(hcnapi.KindNotFound, "Endpoint %q not found", id)
		}
	}
	k, _ := frontendOf(lb)
	if id, ok := f.byFrontend[k]; ok && id != skip {
		return hcnapi.Errorf(hcnapi.KindPortAlreadyExists, "The specified port already exists (frontend %s %d/%d used by %s)", k.vip, k.port, k.protocol, id)
	}
	return nil
}

// CreateLoadBalancer implements hcnapi.Interface.
func (f *Fake) CreateLoadBalancer(lb *hcnapi.LoadBalancer) (*hcnapi.LoadBalancer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(OpCreateLoadBalancer); err != nil {
		return nil, err
	}
	if err := f.check(lb, ""); err != nil {
		return nil, err
	}
	c := lb.Clone()
	c.ID = f.newID("lb")
	f.putLB(c)
	return c.Clone(), nil
}

// UpdateLoadBalancer implements hcnapi.Interface.
func (f *Fake) UpdateLoadBalancer(id string, lb *hcnapi.LoadBalancer) (*hcnapi.LoadBalancer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(OpUpdateLoadBalancer); err != nil {
		return nil, err
	}
	if !f.features.ModifyLoadbalancer {
		return nil, hcnapi.NewError(hcnapi.KindNotImplemented, "Not implemented")
	}
	if f.lbs[id] == nil {
		return nil, hcnapi.Errorf(hcnapi.KindNotFound, "LoadBalancer %q not found", id)
	}
	if err := f.check(lb, id); err != nil {
		return nil, err
	}
	c := lb.Clone()
	c.ID = id
	f.dropLB(id)
	f.putLB(c)
	return c.Clone(), nil
}

// DeleteLoadBalancer implements hcnapi.Interface.
func (f *Fake) DeleteLoadBalancer(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(OpDeleteLoadBalancer); err != nil {
		return err
	}
	if f.lbs[id] == nil {
		return hcnapi.Errorf(hcnapi.KindNotFound, "LoadBalancer %q not found", id)
	}
	f.dropLB(id)
	return nil
}

// Features implements hcnapi.Interface.
func (f *Fake) Features() hcnapi.Features {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.features
}
