package backend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// Collector is an Incremental backend that drives a FullState one: it keeps the model the
// calls describe and, at each Sync, hands every family whose State changed (or whose last
// Sync failed) to the FullState backend.
//
// Endpoints set for a service that has not been set (or was deleted) are kept and appear
// once the service does, so callers need not order their calls.
//
// A Collector is not safe for concurrent use.
type Collector struct {
	full     FullState
	families map[localnode.Family]*collected
}

type collected struct {
	services  map[localnode.PortName]ServiceInfo
	endpoints map[localnode.PortName]map[netip.AddrPort]localnode.Endpoint
	dirty     bool
	// last is the State last synced successfully; failed marks that a later one was not.
	last   *localnode.State
	failed bool
}

// NewCollector returns a Collector feeding full.
func NewCollector(full FullState) *Collector {
	return &Collector{full: full, families: map[localnode.Family]*collected{}}
}

var _ Incremental = &Collector{}

func (c *Collector) family(f localnode.Family) *collected {
	m := c.families[f]
	if m == nil {
		m = &collected{
			services:  map[localnode.PortName]ServiceInfo{},
			endpoints: map[localnode.PortName]map[netip.AddrPort]localnode.Endpoint{},
		}
		c.families[f] = m
	}
	return m
}

// SetService implements Incremental.
func (c *Collector) SetService(family localnode.Family, svc *ServiceInfo) {
	m := c.family(family)
	m.services[svc.Name] = *svc
	m.dirty = true
}

// DeleteService implements Incremental.
func (c *Collector) DeleteService(family localnode.Family, name localnode.PortName) {
	m := c.family(family)
	delete(m.services, name)
	m.dirty = true
}

// SetEndpoint implements Incremental.
func (c *Collector) SetEndpoint(family localnode.Family, service localnode.PortName, ep localnode.Endpoint) {
	m := c.family(family)
	eps := m.endpoints[service]
	if eps == nil {
		eps = map[netip.AddrPort]localnode.Endpoint{}
		m.endpoints[service] = eps
	}
	eps[ep.AddrPort()] = ep
	m.dirty = true
}

// DeleteEndpoint implements Incremental.
func (c *Collector) DeleteEndpoint(family localnode.Family, service localnode.PortName, addr netip.AddrPort) {
	m := c.family(family)
	if eps := m.endpoints[service]; eps != nil {
		delete(eps, addr)
		if len(eps) == 0 {
			delete(m.endpoints, service)
		}
	}
	m.dirty = true
}

// State returns the State the calls so far describe for family.
func (c *Collector) State(family localnode.Family) *localnode.State {
	m := c.family(family)
	st := &localnode.State{Family: family, Services: make([]localnode.Service, 0, len(m.services))}
	for name, info := range m.services {
		svc := localnode.Service{ServicePort: info.ServicePort, HasAnyEndpoints: info.HasAnyEndpoints}
		svc.Name = name
		if eps := m.endpoints[name]; len(eps) > 0 {
			svc.Endpoints = make([]localnode.Endpoint, 0, len(eps))
			for _, ep := range eps {
				svc.Endpoints = append(svc.Endpoints, ep)
			}
			slices.SortFunc(svc.Endpoints, localnode.Endpoint.Compare)
		}
		st.Services = append(st.Services, svc)
	}
	slices.SortFunc(st.Services, func(a, b localnode.Service) int { return a.Name.Compare(b.Name) })
	return st
}

// Sync implements Incremental: families are synced in a fixed order (IPv4 first), and an
// error from one does not keep the other from syncing.
func (c *Collector) Sync(ctx context.Context) error {
	fams := make([]localnode.Family, 0, len(c.families))
	for f := range c.families {
		fams = append(fams, f)
	}
	slices.SortFunc(fams, func(a, b localnode.Family) int { return cmp.Compare(a, b) })
	var errs []error
	for _, f := range fams {
		m := c.families[f]
		if !m.dirty && !m.failed {
			continue
		}
		st := c.State(f)
		m.dirty = false
		if !m.failed && st.Equal(m.last) {
			continue
		}
		if err := c.full.Sync(ctx, st); err != nil {
			m.failed = true
			errs = append(errs, fmt.Errorf("syncing %s state: %w", f, err))
			continue
		}
		m.last, m.failed = st, false
	}
	return errors.Join(errs...)
}
