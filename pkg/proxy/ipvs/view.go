//go:build linux

package ipvs

import (
	"cmp"
	"iter"
	"net"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/util/chaincheck"
	utilipvs "k8s.io/net-utils/ipvs"
)

// vsKey identifies a virtual server; proto is upper case ("TCP").
type vsKey struct {
	addr  netip.Addr
	port  uint16
	proto string
}

// rsKey identifies a real server of a virtual server.
type rsKey struct {
	addr netip.Addr
	port uint16
}

func (k rsKey) compare(o rsKey) int {
	return cmp.Or(k.addr.Compare(o.addr), cmp.Compare(k.port, o.port))
}

func (k rsKey) realServer(weight int) *utilipvs.RealServer {
	return &utilipvs.RealServer{Address: net.IP(k.addr.AsSlice()), Port: k.port, Weight: weight}
}

// desiredVS is a virtual server a service port wants, with its real
// servers sorted.
type desiredVS struct {
	vs  utilipvs.VirtualServer
	rss []rsKey
}

// appliedVS is a virtual server the kernel holds.
type appliedVS struct {
	vs  *utilipvs.VirtualServer
	rss map[rsKey]*appliedRS
	// reconciled is the wish rss last matched exactly (none draining); a
	// sync with the same wish and this same appliedVS has nothing to do.
	reconciled *desiredVS
	// listed is rss in the order the kernel last listed them, while rss has
	// not changed since (nil otherwise): the kernel lists a virtual server's
	// real servers in the same order each time, so a full sync can compare
	// its listing with this in one pass instead of a lookup per real server.
	listed []listedRS
	// seen is the readKernel pass that last found it in the kernel.
	seen uint64
}

type listedRS struct {
	key    rsKey
	weight int
}

func rsKeyOf(rs *utilipvs.RealServer) rsKey {
	a, _ := netip.AddrFromSlice(rs.Address)
	return rsKey{addr: a.Unmap(), port: rs.Port}
}

// matches reports whether rss is exactly a's real servers, with their
// weights, and remembers their order for the next listing.
func (a *appliedVS) matches(rss []*utilipvs.RealServer) bool {
	if len(rss) != len(a.rss) {
		return false
	}
	if a.listed != nil && len(a.listed) == len(rss) {
		same := true
		for i, rs := range rss {
			if l := a.listed[i]; l.weight != rs.Weight || l.key != rsKeyOf(rs) {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	for _, rs := range rss {
		cur := a.rss[rsKeyOf(rs)]
		if cur == nil || cur.weight != rs.Weight {
			return false
		}
	}
	a.setListed(rss)
	return true
}

// setListed records rss, which are exactly a.rss, as the kernel's order.
func (a *appliedVS) setListed(rss []*utilipvs.RealServer) {
	a.listed = make([]listedRS, len(rss))
	for i, rs := range rss {
		a.listed[i] = listedRS{key: rsKeyOf(rs), weight: rs.Weight}
	}
}

// changing is called before rss is edited: the kernel's listing no longer
// matches what was recorded.
func (a *appliedVS) changing() { a.listed = nil }

type appliedRS struct {
	weight int
	// terminating is set while the graceful termination manager drains it.
	terminating bool
}

type setEntry struct {
	set   setID
	entry string
}

// portRender is what one service port contributes, and what it was
// rendered from, so a full sync can keep it when nothing changed.
type portRender struct {
	vss       []*desiredVS
	entries   []setEntry
	binds     []string
	outFilter []string

	svc                 proxy.ServicePort
	eps, cluster, local []proxy.Endpoint
	iLocal, eLocal      bool
	nodeGen             uint64
}

func (r *portRender) setInputs(svc proxy.ServicePort, eps []proxy.Endpoint, tp *proxy.TrafficPolicy, nodeGen uint64) {
	r.svc, r.eps, r.cluster, r.local = svc, eps, tp.ClusterEndpoints, tp.LocalEndpoints
	r.iLocal, r.eLocal, r.nodeGen = tp.InternalLocal, tp.ExternalLocal, nodeGen
}

// sameInputs reports whether rendering again would give r: the same
// ServicePort and endpoint values (the trackers replace what changes), the
// same policy decision and the same node addresses.
func (r *portRender) sameInputs(svc proxy.ServicePort, eps []proxy.Endpoint, tp *proxy.TrafficPolicy, nodeGen uint64) bool {
	return r.nodeGen == nodeGen && proxy.SameServicePort(r.svc, svc) && r.iLocal == tp.InternalLocal && r.eLocal == tp.ExternalLocal &&
		proxy.SameEndpoints(r.eps, eps) && proxy.SameEndpoints(r.cluster, tp.ClusterEndpoints) && proxy.SameEndpoints(r.local, tp.LocalEndpoints)
}

// state is the proxier's authoritative view: what each service port wants
// (claims and reference counts, so that two ports wanting the same entry or
// address keep it until both let go) and what the kernel was given.
type state struct {
	ports map[proxy.ServicePortName]*portRender
	// claims holds every port's wish for each virtual server; the one of the
	// smallest port name is programmed, so the result does not depend on the
	// order ports were synced in.
	claims    map[vsKey][]claim
	setRefs   [numSets]map[string]int
	bindRefs  map[string]int
	outFilter map[string]int
	// bySvc lists each Service's ports, so an endpoint-only change renders
	// just the ports of the Services it names.
	bySvc map[types.NamespacedName]sets.Set[proxy.ServicePortName]

	applied map[vsKey]*appliedVS
	// reads counts readKernel passes (appliedVS.seen).
	reads      uint64
	setApplied [numSets]sets.Set[string]
	bound      sets.Set[string]
	// nodeAddrs and nodeIPs are the node's addresses (outside kube-ipvs0)
	// and node-port addresses as of the last sync; when they change every
	// port is rendered again.
	nodeAddrs sets.Set[string]
	nodeIPs   []net.IP
	// nodeGen counts changes of nodeAddrs and nodeIPs.
	nodeGen uint64
	// rules is the last iptables-restore input written; nil forces a write.
	rules []byte
	// fingerprints holds, per chain of rules, a hash of its rules as
	// iptables-save printed them at a drift check that found the chain as
	// written; emptied whenever rules are written (check.go).
	fingerprints map[chaincheck.Key]uint64
	// iptGen spares the drift check reading the tables on iptables-nft
	// when nothing was committed since a check found the rules as written.
	iptGen chaincheck.Generation
	// synced is false until a full sync succeeded, and after a failure.
	synced bool
}

func newState() *state {
	s := &state{applied: map[vsKey]*appliedVS{}, fingerprints: map[chaincheck.Key]uint64{}}
	s.resetWanted()
	return s
}

func (s *state) resetWanted() {
	s.ports = map[proxy.ServicePortName]*portRender{}
	s.claims = map[vsKey][]claim{}
	for i := range s.setRefs {
		s.setRefs[i] = map[string]int{}
	}
	s.bindRefs = map[string]int{}
	s.outFilter = map[string]int{}
	s.bySvc = map[types.NamespacedName]sets.Set[proxy.ServicePortName]{}
}

func (s *state) indexPort(name proxy.ServicePortName) {
	ports := s.bySvc[name.NamespacedName]
	if ports == nil {
		ports = sets.New[proxy.ServicePortName]()
		s.bySvc[name.NamespacedName] = ports
	}
	ports.Insert(name)
}

func (s *state) unindexPort(name proxy.ServicePortName) {
	if ports := s.bySvc[name.NamespacedName]; ports != nil {
		ports.Delete(name)
		if ports.Len() == 0 {
			delete(s.bySvc, name.NamespacedName)
		}
	}
}

// touched collects what a sync must reconcile: what the changed ports
// wanted before and want now, or, with all, everything wanted or present.
type touched struct {
	// all is set on a full sync: the kernel was read again and every
	// address is reconciled.
	all bool
	// allVSs and allEntries[id] are all for the virtual servers and for the
	// entries of set id. A full sync leaves them false where the kernel held
	// exactly what the previous sync, which succeeded, left there: that
	// agreed with every port's wish, so only the wishes changed since (the
	// touched ones) can differ from it.
	allVSs     bool
	allEntries [numSets]bool
	vss        sets.Set[vsKey]
	entries    [numSets]sets.Set[string]
	binds      sets.Set[string]
}

// vsKeys yields the virtual servers to reconcile; it may yield one twice.
func (t *touched) vsKeys(st *state) iter.Seq[vsKey] {
	return func(yield func(vsKey) bool) {
		for k := range t.vss {
			if !yield(k) {
				return
			}
		}
		if !t.allVSs {
			return
		}
		for k := range st.claims {
			if !yield(k) {
				return
			}
		}
		for k := range st.applied {
			if _, wanted := st.claims[k]; wanted {
				continue
			}
			if !yield(k) {
				return
			}
		}
	}
}

// union yields the keys of touched and, with all, those of every map given.
func union[V any](everything bool, touched sets.Set[string], all ...map[string]V) iter.Seq[string] {
	return func(yield func(string) bool) {
		for k := range touched {
			if !yield(k) {
				return
			}
		}
		if !everything {
			return
		}
		for _, m := range all {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		}
	}
}

func (t *touched) bindKeys(wanted map[string]int) iter.Seq[string] {
	return union(t.all, t.binds, wanted)
}

func (t *touched) unbindKeys(bound sets.Set[string]) iter.Seq[string] {
	return union(t.all, t.binds, bound)
}

func (t *touched) addKeys(id setID, wanted map[string]int) iter.Seq[string] {
	return union(t.allEntries[id], t.entries[id], wanted)
}

func (t *touched) delKeys(id setID, applied sets.Set[string]) iter.Seq[string] {
	return union(t.allEntries[id], t.entries[id], applied)
}

func newTouched() *touched {
	t := &touched{vss: sets.New[vsKey](), binds: sets.New[string]()}
	for i := range t.entries {
		t.entries[i] = sets.New[string]()
	}
	return t
}

func keyOf(vs *utilipvs.VirtualServer) vsKey {
	a, _ := netip.AddrFromSlice(vs.Address)
	return vsKey{addr: a.Unmap(), port: vs.Port, proto: strings.ToUpper(vs.Protocol)}
}

// setPort replaces name's contribution with r (nil: none).
func (s *state) setPort(name proxy.ServicePortName, r *portRender, t *touched) {
	if old := s.ports[name]; old != nil {
		for _, d := range old.vss {
			k := keyOf(&d.vs)
			c := slices.DeleteFunc(s.claims[k], func(c claim) bool { return c.name == name })
			if len(c) == 0 {
				delete(s.claims, k)
			} else {
				s.claims[k] = c
			}
			t.vss.Insert(k)
		}
		for _, e := range old.entries {
			decr(s.setRefs[e.set], e.entry)
			t.entries[e.set].Insert(e.entry)
		}
		for _, a := range old.binds {
			decr(s.bindRefs, a)
			t.binds.Insert(a)
		}
		for _, l := range old.outFilter {
			decr(s.outFilter, l)
		}
		delete(s.ports, name)
	}
	if r == nil {
		return
	}
	s.ports[name] = r
	for _, d := range r.vss {
		k := keyOf(&d.vs)
		s.claims[k] = append(s.claims[k], claim{name: name, d: d})
		t.vss.Insert(k)
	}
	for _, e := range r.entries {
		s.setRefs[e.set][e.entry]++
		t.entries[e.set].Insert(e.entry)
	}
	for _, a := range r.binds {
		s.bindRefs[a]++
		t.binds.Insert(a)
	}
	for _, l := range r.outFilter {
		s.outFilter[l]++
	}
}

func decr(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
	} else {
		m[k]--
	}
}

// wanted returns the virtual server to program at k, or nil.
func (s *state) wanted(k vsKey) *desiredVS {
	c := s.claims[k]
	if len(c) == 0 {
		return nil
	}
	best := c[0]
	for _, o := range c[1:] {
		if proxy.CompareServicePortNames(o.name, best.name) < 0 {
			best = o
		}
	}
	return best.d
}

// claim is one port's wish for a virtual server.
type claim struct {
	name proxy.ServicePortName
	d    *desiredVS
}
