//go:build linux

package ipvs

import (
	"cmp"
	"net"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"k8s.io/kube-proxy/pkg/proxy"
	utilipvs "k8s.io/net-utils/ipvs"
)

// vsKey identifies a virtual server; proto is upper case ("TCP").
type vsKey struct {
	addr  netip.Addr
	port  uint16
	proto string
}

func (k vsKey) compare(o vsKey) int {
	return cmp.Or(k.addr.Compare(o.addr), cmp.Compare(k.port, o.port), strings.Compare(k.proto, o.proto))
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
}

type appliedRS struct {
	weight int
	// terminating is set while the graceful termination manager drains it.
	terminating bool
}

type setEntry struct {
	set   setID
	entry string
}

// portRender is what one service port contributes.
type portRender struct {
	vss       []*desiredVS
	entries   []setEntry
	binds     []string
	outFilter []string
}

// state is the proxier's authoritative view: what each service port wants
// (claims and reference counts, so that two ports wanting the same entry or
// address keep it until both let go) and what the kernel was given.
type state struct {
	ports map[proxy.ServicePortName]*portRender
	// claims holds every port's wish for each virtual server; the one of the
	// smallest port name is programmed, so the result does not depend on the
	// order ports were synced in.
	claims    map[vsKey]map[proxy.ServicePortName]*desiredVS
	setRefs   [numSets]map[string]int
	bindRefs  map[string]int
	outFilter map[string]int
	// bySvc lists each Service's ports, so an endpoint-only change renders
	// just the ports of the Services it names.
	bySvc map[types.NamespacedName]sets.Set[proxy.ServicePortName]

	applied    map[vsKey]*appliedVS
	setApplied [numSets]sets.Set[string]
	bound      sets.Set[string]
	// nodeAddrs and nodeIPs are the node's addresses (outside kube-ipvs0)
	// and node-port addresses as of the last sync; when they change every
	// port is rendered again.
	nodeAddrs sets.Set[string]
	nodeIPs   []net.IP
	// rules is the last iptables-restore input written; nil forces a write.
	rules []byte
	// synced is false until a full sync succeeded, and after a failure.
	synced bool
}

func newState() *state {
	s := &state{}
	s.resetWanted()
	return s
}

func (s *state) resetWanted() {
	s.ports = map[proxy.ServicePortName]*portRender{}
	s.claims = map[vsKey]map[proxy.ServicePortName]*desiredVS{}
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

// touched collects what a sync must reconcile.
type touched struct {
	vss     sets.Set[vsKey]
	entries [numSets]sets.Set[string]
	binds   sets.Set[string]
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
			delete(s.claims[k], name)
			if len(s.claims[k]) == 0 {
				delete(s.claims, k)
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
		c := s.claims[k]
		if c == nil {
			c = map[proxy.ServicePortName]*desiredVS{}
			s.claims[k] = c
		}
		c[name] = d
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
	var best *desiredVS
	var bestName proxy.ServicePortName
	for name, d := range s.claims[k] {
		if best == nil || comparePortNames(name, bestName) < 0 {
			best, bestName = d, name
		}
	}
	return best
}

func comparePortNames(a, b proxy.ServicePortName) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(a.Port, b.Port))
}

func sortedKeys[K comparable](m sets.Set[K], cmpf func(a, b K) int) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, cmpf)
	return out
}
