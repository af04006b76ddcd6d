package metaproxier

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy"
)

// metaProxier fans Provider calls out to one proxier per IP family.
type metaProxier struct {
	ipv4Proxier proxy.Provider
	ipv6Proxier proxy.Provider
}

// NewMetaProxier returns a dual-stack Provider dispatching to ipv4Proxier and
// ipv6Proxier: Service, topology and ServiceCIDR events go to both,
// EndpointSlice events to the one matching the slice's AddressType.
func NewMetaProxier(ipv4Proxier, ipv6Proxier proxy.Provider) proxy.Provider {
	return &metaProxier{ipv4Proxier: ipv4Proxier, ipv6Proxier: ipv6Proxier}
}

var _ proxy.Provider = &metaProxier{}

// Sync asks both proxiers to sync.
func (m *metaProxier) Sync() {
	m.ipv4Proxier.Sync()
	m.ipv6Proxier.Sync()
}

// SyncLoop runs the IPv6 loop in its own goroutine and the IPv4 loop in the
// caller's, so that, like a single-stack proxier, it never returns.
func (m *metaProxier) SyncLoop() {
	go m.ipv6Proxier.SyncLoop()
	m.ipv4Proxier.SyncLoop()
}

// OnServiceAdd forwards to both proxiers.
func (m *metaProxier) OnServiceAdd(service *v1.Service) {
	m.ipv4Proxier.OnServiceAdd(service)
	m.ipv6Proxier.OnServiceAdd(service)
}

// OnServiceUpdate forwards to both proxiers.
func (m *metaProxier) OnServiceUpdate(oldService, service *v1.Service) {
	m.ipv4Proxier.OnServiceUpdate(oldService, service)
	m.ipv6Proxier.OnServiceUpdate(oldService, service)
}

// OnServiceDelete forwards to both proxiers.
func (m *metaProxier) OnServiceDelete(service *v1.Service) {
	m.ipv4Proxier.OnServiceDelete(service)
	m.ipv6Proxier.OnServiceDelete(service)
}

// OnServiceSynced forwards to both proxiers.
func (m *metaProxier) OnServiceSynced() {
	m.ipv4Proxier.OnServiceSynced()
	m.ipv6Proxier.OnServiceSynced()
}

// forFamily picks the proxier owning slices of the given address type, or nil
// (after logging) for types no proxier handles, such as the deprecated FQDN.
func (m *metaProxier) forFamily(slice *discovery.EndpointSlice) proxy.Provider {
	if slice == nil {
		klog.Background().Error(nil, "Ignoring nil EndpointSlice")
		return nil
	}
	switch slice.AddressType {
	case discovery.AddressTypeIPv4:
		return m.ipv4Proxier
	case discovery.AddressTypeIPv6:
		return m.ipv6Proxier
	}
	klog.Background().Error(nil, "Ignoring EndpointSlice with unsupported address type",
		"endpointSlice", klog.KObj(slice), "addressType", slice.AddressType)
	return nil
}

// OnEndpointSliceAdd forwards to the proxier of the slice's family.
func (m *metaProxier) OnEndpointSliceAdd(endpointSlice *discovery.EndpointSlice) {
	if p := m.forFamily(endpointSlice); p != nil {
		p.OnEndpointSliceAdd(endpointSlice)
	}
}

// OnEndpointSliceUpdate forwards to the proxier of the new slice's family.
// AddressType is immutable, so old and new always agree.
func (m *metaProxier) OnEndpointSliceUpdate(oldEndpointSlice, newEndpointSlice *discovery.EndpointSlice) {
	if p := m.forFamily(newEndpointSlice); p != nil {
		p.OnEndpointSliceUpdate(oldEndpointSlice, newEndpointSlice)
	}
}

// OnEndpointSliceDelete forwards to the proxier of the slice's family.
func (m *metaProxier) OnEndpointSliceDelete(endpointSlice *discovery.EndpointSlice) {
	if p := m.forFamily(endpointSlice); p != nil {
		p.OnEndpointSliceDelete(endpointSlice)
	}
}

// OnEndpointSlicesSynced forwards to both proxiers.
func (m *metaProxier) OnEndpointSlicesSynced() {
	m.ipv4Proxier.OnEndpointSlicesSynced()
	m.ipv6Proxier.OnEndpointSlicesSynced()
}

// OnTopologyChange forwards to both proxiers.
func (m *metaProxier) OnTopologyChange(topologyLabels map[string]string) {
	m.ipv4Proxier.OnTopologyChange(topologyLabels)
	m.ipv6Proxier.OnTopologyChange(topologyLabels)
}

// OnServiceCIDRsChanged forwards the full CIDR list to both proxiers; each
// keeps the CIDRs of its own family.
func (m *metaProxier) OnServiceCIDRsChanged(cidrs []string) {
	m.ipv4Proxier.OnServiceCIDRsChanged(cidrs)
	m.ipv6Proxier.OnServiceCIDRsChanged(cidrs)
}

// NewDualStack builds one proxier per IP family with newProxier and returns
// a MetaProxier over them: the body every backend's NewDualStackProxier
// shares. With initOnly the constructors only prepare the host, and so does
// NewDualStack: it returns (nil, nil).
func NewDualStack[P proxy.Provider](initOnly bool, newProxier func(v1.IPFamily) (P, error)) (proxy.Provider, error) {
	ipv4, err := newProxier(v1.IPv4Protocol)
	if err != nil {
		return nil, fmt.Errorf("creating the IPv4 proxier: %w", err)
	}
	ipv6, err := newProxier(v1.IPv6Protocol)
	if err != nil {
		return nil, fmt.Errorf("creating the IPv6 proxier: %w", err)
	}
	if initOnly {
		return nil, nil
	}
	return NewMetaProxier(ipv4, ipv6), nil
}
