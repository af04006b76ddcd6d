package backend

import (
	"context"
	"net/netip"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// FullState is a backend that programs whole States.
//
// Sync is called from one goroutine at a time, once per IP family whose State changed,
// and again with the same State after it returned an error. The State is shared and
// read-only; the backend may keep it until the next Sync of the same family.
type FullState interface {
	Sync(ctx context.Context, state *localnode.State) error
}

// FullStateFunc adapts a function to FullState.
type FullStateFunc func(ctx context.Context, state *localnode.State) error

// Sync calls f.
func (f FullStateFunc) Sync(ctx context.Context, state *localnode.State) error { return f(ctx, state) }

// ServiceInfo is what Incremental.SetService carries: a service port and whether it has
// usable endpoints anywhere (see localnode.Service.HasAnyEndpoints). Its endpoints come
// separately, through SetEndpoint.
type ServiceInfo struct {
	localnode.ServicePort
	HasAnyEndpoints bool
}

// Equal reports whether s and o are the same.
func (s *ServiceInfo) Equal(o *ServiceInfo) bool {
	return s.HasAnyEndpoints == o.HasAnyEndpoints && s.ServicePort.Equal(&o.ServicePort)
}

// Incremental is a backend that keeps its own model and is told what changed.
//
// The Set and Delete calls describe the desired state and cannot fail: record them.
// Sync is a per-family barrier: the calls since the previous Sync all concern one IP
// family (the one each call names) and together bring that family to a consistent
// state, which Sync applies; the other family's recorded state is untouched and already
// consistent. Sync itself does not say which family it closes: a backend that needs to
// know implements FamilySyncer as well. If Sync fails, the calls are not repeated; the
// next Sync (which may follow no other call, and may then be a retry for either family)
// must apply the recorded state again.
//
// Within one batch, services are set before their endpoints and deleted after them, so an
// endpoint never refers to a service the backend has not been told about. All calls come
// from one goroutine at a time.
type Incremental interface {
	// SetService adds a service port or changes it. svc is read-only.
	SetService(family localnode.Family, svc *ServiceInfo)
	// DeleteService removes a service port whose endpoints have already been deleted.
	DeleteService(family localnode.Family, name localnode.PortName)
	// SetEndpoint adds or changes one endpoint of service, keyed by its address and port.
	SetEndpoint(family localnode.Family, service localnode.PortName, ep localnode.Endpoint)
	// DeleteEndpoint removes the endpoint at addr from service.
	DeleteEndpoint(family localnode.Family, service localnode.PortName, addr netip.AddrPort)
	// Sync applies everything recorded.
	Sync(ctx context.Context) error
}

// FamilySyncer is implemented by an Incremental backend that wants its barrier to name
// the family: the Differ then calls SyncFamily, with the family of the calls just made
// (or of the State being retried), instead of Sync.
type FamilySyncer interface {
	SyncFamily(ctx context.Context, family localnode.Family) error
}
