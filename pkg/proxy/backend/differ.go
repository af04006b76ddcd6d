package backend

import (
	"context"
	"fmt"
	"net/netip"

	"k8s.io/kube-proxy/pkg/proxy/diffstore"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// Differ is a FullState backend that drives an Incremental one: each State is written as
// one diffstore wave, and only what was added, updated or deleted since the previous State
// of the same family is passed on, followed by the Incremental's Sync.
//
// A Differ is not safe for concurrent use; FullState callers never call it concurrently.
type Differ struct {
	inc      Incremental
	families map[localnode.Family]*familyStores
}

type familyStores struct {
	services  *diffstore.Store[localnode.PortName, ServiceInfo]
	endpoints *diffstore.Store[endpointKey, localnode.Endpoint]
}

type endpointKey struct {
	service localnode.PortName
	addr    netip.AddrPort
}

// NewDiffer returns a Differ feeding inc.
func NewDiffer(inc Incremental) *Differ {
	return &Differ{inc: inc, families: map[localnode.Family]*familyStores{}}
}

var _ FullState = &Differ{}

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
			endpoints: diffstore.NewComparable[endpointKey, localnode.Endpoint](),
		}
		d.families[fam] = fs
	}
	fs.services.Next()
	fs.endpoints.Next()
	for i := range state.Services {
		svc := &state.Services[i]
		fs.services.Set(svc.Name, ServiceInfo{ServicePort: svc.ServicePort, HasAnyEndpoints: svc.HasAnyEndpoints})
		for _, ep := range svc.Endpoints {
			fs.endpoints.Set(endpointKey{svc.Name, ep.AddrPort()}, ep)
		}
	}
	fs.services.Finish()
	fs.endpoints.Finish()

	for _, list := range [][]diffstore.Change[localnode.PortName, ServiceInfo]{fs.services.Added(), fs.services.Updated()} {
		for i := range list {
			d.inc.SetService(fam, &list[i].New)
		}
	}
	for _, list := range [][]diffstore.Change[endpointKey, localnode.Endpoint]{fs.endpoints.Added(), fs.endpoints.Updated()} {
		for _, c := range list {
			d.inc.SetEndpoint(fam, c.Key.service, c.New)
		}
	}
	for _, c := range fs.endpoints.Deleted() {
		d.inc.DeleteEndpoint(fam, c.Key.service, c.Key.addr)
	}
	for _, c := range fs.services.Deleted() {
		d.inc.DeleteService(fam, c.Key)
	}
	return d.inc.Sync(ctx)
}
