package backend

import (
	"context"
	"fmt"
	"net/netip"

	"k8s.io/kube-proxy/pkg/proxy/diffstore"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// Differ is a FullState backend that drives an Incremental one: each State is written as
// diffstore waves, and only what was added, updated or deleted since the previous State of
// the same family is passed on, followed by the Incremental's Sync (its SyncFamily, if it
// implements FamilySyncer).
//
// Services go into one store per family; endpoints into one store per service, written
// only when that service's endpoint list is not the very slice of the previous State
// (States from proxyrun share the slices of unchanged services), so a revision costs a
// pass over the services plus the endpoints that changed.
//
// A Differ is not safe for concurrent use; FullState callers never call it concurrently.
type Differ struct {
	inc      Incremental
	families map[localnode.Family]*familyStores
}

type familyStores struct {
	services  *diffstore.Store[localnode.PortName, ServiceInfo]
	endpoints map[localnode.PortName]*endpointStore
}

type endpointStore struct {
	store *diffstore.Store[netip.AddrPort, localnode.Endpoint]
	// last is the endpoint slice the store was last written from.
	last []localnode.Endpoint
}

// NewDiffer returns a Differ feeding inc.
func NewDiffer(inc Incremental) *Differ {
	return &Differ{inc: inc, families: map[localnode.Family]*familyStores{}}
}

var _ FullState = &Differ{}

type endpointChange struct {
	service localnode.PortName
	addr    netip.AddrPort
}

// Sync implements FullState. The Incremental's Sync runs even when nothing changed, since
// FullState callers only repeat a State to retry a failed sync.
func (d *Differ) Sync(ctx context.Context, state *localnode.State) error {
	if state == nil {
		return fmt.Errorf("differ: nil state")
	}
	fam := state.Family
	fs := d.families[fam]
	if fs == nil {
		fs = &familyStores{
			services:  diffstore.New[localnode.PortName, ServiceInfo](func(a, b ServiceInfo) bool { return a.Equal(&b) }),
			endpoints: map[localnode.PortName]*endpointStore{},
		}
		d.families[fam] = fs
	}
	fs.services.Next()
	for i := range state.Services {
		svc := &state.Services[i]
		fs.services.Set(svc.Name, ServiceInfo{ServicePort: svc.ServicePort, HasAnyEndpoints: svc.HasAnyEndpoints})
	}
	fs.services.Finish()

	for _, list := range [][]diffstore.Change[localnode.PortName, ServiceInfo]{fs.services.Added(), fs.services.Updated()} {
		for i := range list {
			d.inc.SetService(fam, &list[i].New)
		}
	}
	var deletes []endpointChange
	for i := range state.Services {
		svc := &state.Services[i]
		es := fs.endpoints[svc.Name]
		if es == nil {
			if len(svc.Endpoints) == 0 {
				continue
			}
			es = &endpointStore{store: diffstore.NewComparable[netip.AddrPort, localnode.Endpoint]()}
			fs.endpoints[svc.Name] = es
		} else if sameSlice(es.last, svc.Endpoints) {
			continue
		}
		es.store.Next()
		for _, ep := range svc.Endpoints {
			es.store.Set(ep.AddrPort(), ep)
		}
		es.store.Finish()
		es.last = svc.Endpoints
		for _, list := range [][]diffstore.Change[netip.AddrPort, localnode.Endpoint]{es.store.Added(), es.store.Updated()} {
			for _, c := range list {
				d.inc.SetEndpoint(fam, svc.Name, c.New)
			}
		}
		for _, c := range es.store.Deleted() {
			deletes = append(deletes, endpointChange{svc.Name, c.Key})
		}
	}
	for _, c := range fs.services.Deleted() {
		if es := fs.endpoints[c.Key]; es != nil {
			for _, ep := range es.last {
				deletes = append(deletes, endpointChange{c.Key, ep.AddrPort()})
			}
			delete(fs.endpoints, c.Key)
		}
	}
	for _, c := range deletes {
		d.inc.DeleteEndpoint(fam, c.service, c.addr)
	}
	for _, c := range fs.services.Deleted() {
		d.inc.DeleteService(fam, c.Key)
	}
	if f, ok := d.inc.(FamilySyncer); ok {
		return f.SyncFamily(ctx, fam)
	}
	return d.inc.Sync(ctx)
}

// sameSlice reports whether a and b are the same slice (or both empty), in which case
// their contents are equal without looking: States are read-only.
func sameSlice(a, b []localnode.Endpoint) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0]
}
