package ebpf

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// Backend is the library's incremental backend (backend.Incremental, with
// backend.FamilySyncer) over the socket load-balancing maps. It keeps the desired
// state it is told and what it has programmed, and a sync writes only the services
// that changed.
type Backend struct {
	maps    *Maps
	nodeIPs map[localnode.Family][]netip.Addr
	nextID  uint32
	fams    map[localnode.Family]*familyState
}

type familyState struct {
	services map[localnode.PortName]*serviceRecord
	dirty    map[localnode.PortName]bool
	// adopted are the frontends and sets found in pinned maps at start (a restart):
	// they keep translating until the first sync of the family has written their
	// replacements, then they are deleted.
	adopted *Adopted
}

type serviceRecord struct {
	info *backend.ServiceInfo // nil once deleted
	eps  map[netip.AddrPort]localnode.Endpoint
	prog programmedService
}

type programmedService struct {
	frontends          map[feKey]uint32
	internal, external *programmedSet
}

// Adopted is what pinned maps held when the datapath was opened.
type Adopted struct {
	Frontends map[feKey]uint32
	Sets      map[uint32]setVal
}

var (
	_ backend.Incremental  = &Backend{}
	_ backend.FamilySyncer = &Backend{}
)

// NewBackend returns a backend writing maps. nodeIPs are the node's addresses, on
// which NodePorts are translated for local clients. adopted (may be nil) is what the
// maps already hold, from a previous run.
func NewBackend(maps *Maps, nodeIPs []netip.Addr, adopted *Adopted) *Backend {
	b := &Backend{maps: maps, nodeIPs: map[localnode.Family][]netip.Addr{}, nextID: 1, fams: map[localnode.Family]*familyState{}}
	for _, ip := range nodeIPs {
		f := familyOf(ip)
		b.nodeIPs[f] = append(b.nodeIPs[f], ip.Unmap())
	}
	for _, f := range []localnode.Family{localnode.IPv4, localnode.IPv6} {
		b.fams[f] = &familyState{services: map[localnode.PortName]*serviceRecord{}, dirty: map[localnode.PortName]bool{}}
	}
	if adopted != nil {
		for id := range adopted.Sets {
			b.nextID = max(b.nextID, id+1)
		}
		for k, id := range adopted.Frontends {
			b.nextID = max(b.nextID, id+1)
			f := localnode.IPv4
			if k.Family == familyV6 {
				f = localnode.IPv6
			}
			fs := b.fams[f]
			if fs.adopted == nil {
				fs.adopted = &Adopted{Frontends: map[feKey]uint32{}, Sets: map[uint32]setVal{}}
			}
			fs.adopted.Frontends[k] = id
			if v, ok := adopted.Sets[id]; ok {
				fs.adopted.Sets[id] = v
			}
		}
		// A set no frontend names (a previous run stopped between writing it and
		// its frontend) goes with the IPv4 family's first sync.
		referenced := map[uint32]bool{}
		for _, id := range adopted.Frontends {
			referenced[id] = true
		}
		for id, v := range adopted.Sets {
			if referenced[id] {
				continue
			}
			fs := b.fams[localnode.IPv4]
			if fs.adopted == nil {
				fs.adopted = &Adopted{Frontends: map[feKey]uint32{}, Sets: map[uint32]setVal{}}
			}
			fs.adopted.Sets[id] = v
		}
	}
	return b
}

func familyOf(a netip.Addr) localnode.Family {
	if a.Unmap().Is4() {
		return localnode.IPv4
	}
	return localnode.IPv6
}

func (b *Backend) record(f localnode.Family, name localnode.PortName) *serviceRecord {
	fs := b.fams[f]
	r := fs.services[name]
	if r == nil {
		r = &serviceRecord{eps: map[netip.AddrPort]localnode.Endpoint{}}
		fs.services[name] = r
	}
	fs.dirty[name] = true
	return r
}

// SetService implements backend.Incremental.
func (b *Backend) SetService(f localnode.Family, svc *backend.ServiceInfo) {
	c := *svc
	b.record(f, svc.Name).info = &c
}

// DeleteService implements backend.Incremental.
func (b *Backend) DeleteService(f localnode.Family, name localnode.PortName) {
	r := b.record(f, name)
	r.info = nil
	clear(r.eps)
}

// SetEndpoint implements backend.Incremental.
func (b *Backend) SetEndpoint(f localnode.Family, name localnode.PortName, ep localnode.Endpoint) {
	b.record(f, name).eps[ep.AddrPort()] = ep
}

// DeleteEndpoint implements backend.Incremental.
func (b *Backend) DeleteEndpoint(f localnode.Family, name localnode.PortName, addr netip.AddrPort) {
	delete(b.record(f, name).eps, addr)
}

// Sync implements backend.Incremental: it applies every family with pending changes
// (a retry after a failure may concern either).
func (b *Backend) Sync(ctx context.Context) error {
	var errs []error
	for _, f := range []localnode.Family{localnode.IPv4, localnode.IPv6} {
		if len(b.fams[f].dirty) > 0 || b.fams[f].adopted != nil {
			errs = append(errs, b.SyncFamily(ctx, f))
		}
	}
	return errors.Join(errs...)
}

// SyncFamily implements backend.FamilySyncer. A service that fails stays pending, so
// the next sync retries it.
func (b *Backend) SyncFamily(ctx context.Context, f localnode.Family) error {
	logger := klog.FromContext(ctx)
	fs := b.fams[f]
	// Services are independent of each other, so they are applied in map order: a
	// sort would cost a sixth of a 50k-service full sync.
	var errs []error
	count := len(fs.dirty)
	for n := range fs.dirty {
		r := fs.services[n]
		if err := b.apply(f, r); err != nil {
			errs = append(errs, fmt.Errorf("service %s: %w", n, err))
			continue
		}
		delete(fs.dirty, n)
		if r.info == nil {
			delete(fs.services, n)
		}
	}
	if len(errs) == 0 && fs.adopted != nil {
		if err := b.dropAdopted(fs); err != nil {
			errs = append(errs, err)
		}
	}
	logger.V(4).Info("Synced socket load-balancing maps", "family", f, "services", count, "errors", len(errs))
	return errors.Join(errs...)
}

// dropAdopted deletes what a previous run left that this run's first sync did not
// take over: frontends first (so nothing new reaches the old sets), then the sets.
func (b *Backend) dropAdopted(fs *familyState) error {
	live := map[feKey]bool{}
	for _, r := range fs.services {
		for k := range r.prog.frontends {
			live[k] = true
		}
	}
	for k := range fs.adopted.Frontends {
		if live[k] {
			continue
		}
		if err := b.maps.Frontends.Delete(k); err != nil {
			return fmt.Errorf("deleting adopted frontend %s: %w", k, err)
		}
	}
	for id, v := range fs.adopted.Sets {
		ps := &programmedSet{id: id, slots: make([]netip.AddrPort, v.Count), val: v}
		if err := b.maps.deleteSet(ps); err != nil {
			return fmt.Errorf("deleting adopted set: %w", err)
		}
	}
	fs.adopted = nil
	return nil
}

// desired is what one service port should look like in the maps.
type desired struct {
	internal, external       []netip.AddrPort
	internalVal, externalVal setVal
	frontends                map[feKey]bool // true: external set
}

// socketProtocol says whether the socket hooks see connections of protocol p. SCTP's
// connect() and sendmsg() never run the cgroup connect or sendmsg hooks (see
// docs/socket-lb.md), so an SCTP service gets no map entry at all: its traffic
// goes to the nftables or iptables rules, and a tracer reading the maps back finds
// nothing to report rather than a translation that would never happen.
func socketProtocol(p localnode.Protocol) bool {
	return p != localnode.SCTP
}

// protoNumber is the IP protocol the hooks report for p.
func protoNumber(p localnode.Protocol) uint8 {
	switch p {
	case localnode.UDP:
		return protoUDP
	case localnode.SCTP:
		return protoSCTP
	default:
		return protoTCP
	}
}

func addrPorts(eps []localnode.Endpoint) []netip.AddrPort {
	out := make([]netip.AddrPort, len(eps))
	for i := range eps {
		out[i] = eps[i].AddrPort()
	}
	return out
}

// want computes the desired maps for a service from the model's endpoint choice.
func (b *Backend) want(f localnode.Family, r *serviceRecord) desired {
	svc := localnode.Service{ServicePort: r.info.ServicePort, HasAnyEndpoints: r.info.HasAnyEndpoints}
	for _, ep := range r.eps {
		svc.Endpoints = append(svc.Endpoints, ep)
	}
	slices.SortFunc(svc.Endpoints, localnode.Endpoint.Compare)

	var aff uint32
	if svc.SessionAffinity == localnode.AffinityClientIP {
		aff = uint32(max(svc.AffinityTimeout.Seconds(), 1))
	}
	mkVal := func(eps []netip.AddrPort) setVal {
		v := setVal{AffinitySec: aff}
		// An empty list rejects only when the service has no endpoint anywhere; an
		// empty list under Local policy is left to the nftables rules, which drop.
		if len(eps) == 0 && !svc.HasAnyEndpoints {
			v.Flags = setFlagReject
		}
		return v
	}
	d := desired{frontends: map[feKey]bool{}}
	proto := protoNumber(svc.Name.Protocol)
	d.internal = addrPorts(svc.InternalEndpoints())
	d.internalVal = mkVal(d.internal)
	d.frontends[makeFeKey(svc.ClusterIP, svc.Port, proto)] = false

	if svc.ExternallyAccessible() {
		// The socket hooks only see clients on this node, and kube-proxy sends
		// locally-originated traffic to an external destination to the cluster-wide
		// endpoints whatever the external traffic policy (its "short-circuit local
		// traffic" rules): so the external set is ClusterEndpoints, which under
		// Cluster policy is ExternalEndpoints.
		d.external = addrPorts(svc.ClusterEndpoints())
		d.externalVal = mkVal(d.external)
		if svc.NodePort != 0 {
			for _, ip := range b.nodeIPs[f] {
				d.frontends[makeFeKey(ip, svc.NodePort, proto)] = true
			}
		}
		for _, ip := range svc.ExternalIPs {
			d.frontends[makeFeKey(ip, svc.Port, proto)] = true
		}
		// Source ranges restrict who may use a load-balancer VIP; a connect hook
		// does not know the source address yet, so such VIPs stay with nftables.
		if len(svc.SourceRanges) == 0 {
			for _, ip := range svc.LoadBalancerVIPs {
				d.frontends[makeFeKey(ip, svc.Port, proto)] = true
			}
		}
	}
	return d
}

func (b *Backend) allocID() uint32 {
	id := b.nextID
	b.nextID++
	return id
}

// apply programs one service port: sets first, then frontends pointing at them, then
// removals (frontends before the sets they pointed at).
func (b *Backend) apply(f localnode.Family, r *serviceRecord) error {
	old := r.prog
	next := programmedService{frontends: map[feKey]uint32{}}
	if r.info != nil && socketProtocol(r.info.Name.Protocol) {
		d := b.want(f, r)
		writeSet := func(cur *programmedSet, eps []netip.AddrPort, val setVal) (*programmedSet, error) {
			id := uint32(0)
			if cur != nil {
				id = cur.id
			} else {
				id = b.allocID()
			}
			return b.maps.writeSet(id, cur, eps, val)
		}
		var err error
		if next.internal, err = writeSet(old.internal, d.internal, d.internalVal); err != nil {
			return err
		}
		r.prog.internal = next.internal
		hasExternal := false
		for _, ext := range d.frontends {
			hasExternal = hasExternal || ext
		}
		if hasExternal {
			if next.external, err = writeSet(old.external, d.external, d.externalVal); err != nil {
				return err
			}
			r.prog.external = next.external
		}
		for k, ext := range d.frontends {
			id := next.internal.id
			if ext {
				id = next.external.id
			}
			next.frontends[k] = id
			if cur, ok := old.frontends[k]; ok && cur == id {
				continue
			}
			if err := b.maps.Frontends.Put(k, feVal{SetID: id}); err != nil {
				return fmt.Errorf("writing frontend %s: %w", k, err)
			}
			if r.prog.frontends == nil {
				r.prog.frontends = map[feKey]uint32{}
			}
			r.prog.frontends[k] = id
		}
	}
	for k := range old.frontends {
		if _, ok := next.frontends[k]; ok {
			continue
		}
		if err := b.maps.Frontends.Delete(k); err != nil {
			return fmt.Errorf("deleting frontend %s: %w", k, err)
		}
		delete(r.prog.frontends, k)
	}
	for _, pair := range [][2]*programmedSet{{old.internal, next.internal}, {old.external, next.external}} {
		if pair[0] != nil && pair[1] == nil {
			if err := b.maps.deleteSet(pair[0]); err != nil {
				return err
			}
		}
	}
	r.prog = next
	return nil
}
