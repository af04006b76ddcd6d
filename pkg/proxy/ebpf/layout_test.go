package ebpf

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// fakeMaps is the three maps in memory, sharing one log of operations. After every
// operation it checks what a BPF program could observe: every set's slots below its
// count exist, and every frontend names an existing set. A writer that raised a count
// before writing the slots, or deleted a set before its frontends, fails the test.
type fakeMaps struct {
	t        *testing.T
	fe       map[feKey]uint32
	sets     map[uint32]setVal
	be       map[beKey]beVal
	log      []string
	failNext string // "put" or "delete" makes the next such call fail once
}

type fakeMap struct {
	f    *fakeMaps
	name string
}

func newFakeMaps(t *testing.T) *fakeMaps {
	return &fakeMaps{t: t, fe: map[feKey]uint32{}, sets: map[uint32]setVal{}, be: map[beKey]beVal{}}
}

func (f *fakeMaps) maps() *Maps {
	return &Maps{Frontends: fakeMap{f, "frontends"}, Sets: fakeMap{f, "sets"}, Backends: fakeMap{f, "backends"}}
}

var errInjected = errors.New("injected failure")

func (m fakeMap) Put(key, value any) error {
	if m.f.failNext == "put" {
		m.f.failNext = ""
		return errInjected
	}
	switch m.name {
	case "frontends":
		m.f.fe[key.(feKey)] = value.(feVal).SetID
		m.f.log = append(m.f.log, fmt.Sprintf("put fe %s -> %d", key.(feKey), value.(feVal).SetID))
	case "sets":
		m.f.sets[key.(uint32)] = value.(setVal)
		m.f.log = append(m.f.log, fmt.Sprintf("put set %d count=%d", key.(uint32), value.(setVal).Count))
	case "backends":
		k := key.(beKey)
		m.f.be[k] = value.(beVal)
		m.f.log = append(m.f.log, fmt.Sprintf("put be %d/%d %s", k.SetID, k.Slot, beString(value.(beVal), familyV4)))
	}
	m.f.check()
	return nil
}

func (m fakeMap) Delete(key any) error {
	if m.f.failNext == "delete" {
		m.f.failNext = ""
		return errInjected
	}
	switch m.name {
	case "frontends":
		delete(m.f.fe, key.(feKey))
		m.f.log = append(m.f.log, fmt.Sprintf("del fe %s", key.(feKey)))
	case "sets":
		delete(m.f.sets, key.(uint32))
		m.f.log = append(m.f.log, fmt.Sprintf("del set %d", key.(uint32)))
	case "backends":
		k := key.(beKey)
		delete(m.f.be, k)
		m.f.log = append(m.f.log, fmt.Sprintf("del be %d/%d", k.SetID, k.Slot))
	}
	m.f.check()
	return nil
}

func (f *fakeMaps) check() {
	f.t.Helper()
	for id, v := range f.sets {
		for s := uint32(0); s < v.Count; s++ {
			if _, ok := f.be[beKey{id, s}]; !ok {
				f.t.Errorf("after %q: set %d has count %d but slot %d is missing", f.log[len(f.log)-1], id, v.Count, s)
			}
		}
	}
	for k, id := range f.fe {
		if _, ok := f.sets[id]; !ok {
			f.t.Errorf("after %q: frontend %s points at missing set %d", f.log[len(f.log)-1], k, id)
		}
	}
}

func beString(v beVal, fam uint8) string {
	return netip.AddrPortFrom(wordsAddr(v.Addr, fam), v.Port).String()
}

// view is what a program would resolve each frontend to.
type view struct {
	Endpoints []string
	Reject    bool
	Affinity  uint32
}

func (f *fakeMaps) view() map[string]view {
	out := map[string]view{}
	for k, id := range f.fe {
		s := f.sets[id]
		v := view{Reject: s.Flags&setFlagReject != 0, Affinity: s.AffinitySec}
		for i := uint32(0); i < s.Count; i++ {
			v.Endpoints = append(v.Endpoints, beString(f.be[beKey{id, i}], k.Family))
		}
		slices.Sort(v.Endpoints)
		out[k.String()] = v
	}
	return out
}

func aps(s ...string) []netip.AddrPort {
	out := make([]netip.AddrPort, len(s))
	for i, x := range s {
		out[i] = netip.MustParseAddrPort(x)
	}
	return out
}

func TestPlanSlots(t *testing.T) {
	const a, b, c, d = "10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"
	for _, tc := range []struct {
		name            string
		old, want, slot []string
	}{
		{"first", nil, []string{a, b}, []string{a, b}},
		{"unchanged", []string{b, a}, []string{a, b}, []string{b, a}},
		{"append", []string{a, b}, []string{a, b, c}, []string{a, b, c}},
		{"remove last", []string{a, b}, []string{a}, []string{a}},
		{"remove first: the last moves in", []string{a, b, c}, []string{b, c}, []string{c, b}},
		{"replace in place", []string{a, b, c}, []string{a, d, c}, []string{a, d, c}},
		{"replace and shrink", []string{a, b, c}, []string{d, c}, []string{d, c}},
		{"remove two of four", []string{a, b, c, d}, []string{a, d}, []string{a, d}},
		{"all gone", []string{a, b}, nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planSlots(aps(tc.old...), aps(tc.want...))
			if diff := cmp.Diff(aps(tc.slot...), got, cmp.Comparer(func(x, y netip.AddrPort) bool { return x == y })); diff != "" {
				t.Errorf("slots (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteSetOrder(t *testing.T) {
	const a, b, c = "10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"
	for _, tc := range []struct {
		name      string
		old, want []string
		ops       []string
	}{
		{"new set: slots, then count", nil, []string{a, b}, []string{
			"put be 1/0 10.0.0.1:80", "put be 1/1 10.0.0.2:80", "put set 1 count=2"}},
		{"grow: new slot, then count", []string{a}, []string{a, b}, []string{
			"put be 1/1 10.0.0.2:80", "put set 1 count=2"}},
		{"shrink: move, count, then delete", []string{a, b, c}, []string{b, c}, []string{
			"put be 1/0 10.0.0.3:80", "put set 1 count=2", "del be 1/2"}},
		{"no change: no write", []string{a, b}, []string{b, a}, nil},
		{"to empty: count, then delete", []string{a}, nil, []string{"put set 1 count=0", "del be 1/0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeMaps(t)
			m := f.maps()
			var old *programmedSet
			if tc.old != nil {
				var err error
				if old, err = m.writeSet(1, nil, aps(tc.old...), setVal{}); err != nil {
					t.Fatal(err)
				}
			}
			f.log = nil
			if _, err := m.writeSet(1, old, aps(tc.want...), setVal{}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.ops, f.log); diff != "" {
				t.Errorf("operations (-want +got):\n%s", diff)
			}
		})
	}
}

func ep(ip string, forCluster, forLocal bool) localnode.Endpoint {
	return localnode.Endpoint{IP: netip.MustParseAddr(ip), Port: 8080, Ready: true, Serving: true, ForCluster: forCluster, ForLocal: forLocal}
}

func svcOf(name string, proto localnode.Protocol, vip string, mod func(*localnode.Service), eps ...localnode.Endpoint) localnode.Service {
	s := localnode.Service{ServicePort: localnode.ServicePort{
		Name:      localnode.PortName{Namespace: "ns", Name: name, Port: "p", Protocol: proto},
		ClusterIP: netip.MustParseAddr(vip), Port: 80,
	}, Endpoints: eps, HasAnyEndpoints: len(eps) > 0}
	if mod != nil {
		mod(&s)
	}
	return s
}

func TestBackendLayout(t *testing.T) {
	nodeIPs := []netip.Addr{netip.MustParseAddr("198.18.0.10"), netip.MustParseAddr("fd00::10")}
	both := []string{"10.1.0.1:8080", "10.1.0.2:8080"}
	for _, tc := range []struct {
		name string
		svcs []localnode.Service
		want map[string]view
	}{
		{
			name: "ClusterIP TCP",
			svcs: []localnode.Service{svcOf("web", localnode.TCP, "10.96.0.10", nil, ep("10.1.0.1", true, true), ep("10.1.0.2", true, false))},
			want: map[string]view{"10.96.0.10:80/6": {Endpoints: both}},
		},
		{
			name: "UDP keyed by protocol; SCTP not written (the hooks never see it)",
			svcs: []localnode.Service{
				svcOf("dns", localnode.UDP, "10.96.0.53", nil, ep("10.1.0.1", true, true)),
				svcOf("sig", localnode.SCTP, "10.96.0.54", nil, ep("10.1.0.1", true, true)),
			},
			want: map[string]view{
				"10.96.0.53:80/17": {Endpoints: []string{"10.1.0.1:8080"}},
			},
		},
		{
			name: "no endpoints anywhere rejects",
			svcs: []localnode.Service{svcOf("web", localnode.TCP, "10.96.0.10", nil)},
			want: map[string]view{"10.96.0.10:80/6": {Reject: true}},
		},
		{
			name: "internal Local without local endpoints is left to nftables (drop)",
			svcs: []localnode.Service{svcOf("web", localnode.TCP, "10.96.0.10", func(s *localnode.Service) {
				s.InternalPolicy = localnode.PolicyLocal
			}, ep("10.1.0.2", true, false))},
			want: map[string]view{"10.96.0.10:80/6": {}},
		},
		{
			name: "internal Local uses the local endpoint only",
			svcs: []localnode.Service{svcOf("web", localnode.TCP, "10.96.0.10", func(s *localnode.Service) {
				s.InternalPolicy = localnode.PolicyLocal
			}, ep("10.1.0.1", true, true), ep("10.1.0.2", true, false))},
			want: map[string]view{"10.96.0.10:80/6": {Endpoints: []string{"10.1.0.1:8080"}}},
		},
		{
			name: "external kinds: NodePort on node IPs, externalIPs, LB VIPs; external Local still cluster-wide for local clients",
			svcs: []localnode.Service{svcOf("lb", localnode.TCP, "10.96.0.12", func(s *localnode.Service) {
				s.NodePort = 30080
				s.ExternalIPs = []netip.Addr{netip.MustParseAddr("203.0.113.1")}
				s.LoadBalancerVIPs = []netip.Addr{netip.MustParseAddr("198.18.100.1")}
				s.ExternalPolicy = localnode.PolicyLocal
			}, ep("10.1.0.1", true, true), ep("10.1.0.2", true, false))},
			want: map[string]view{
				"10.96.0.12:80/6":     {Endpoints: both},
				"198.18.0.10:30080/6": {Endpoints: both},
				"203.0.113.1:80/6":    {Endpoints: both},
				"198.18.100.1:80/6":   {Endpoints: both},
			},
		},
		{
			name: "LB VIPs with source ranges stay with nftables",
			svcs: []localnode.Service{svcOf("lb", localnode.TCP, "10.96.0.12", func(s *localnode.Service) {
				s.LoadBalancerVIPs = []netip.Addr{netip.MustParseAddr("198.18.100.1")}
				s.SourceRanges = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/16")}
			}, ep("10.1.0.1", true, true))},
			want: map[string]view{"10.96.0.12:80/6": {Endpoints: []string{"10.1.0.1:8080"}}},
		},
		{
			name: "ClientIP affinity timeout in seconds",
			svcs: []localnode.Service{svcOf("web", localnode.TCP, "10.96.0.10", func(s *localnode.Service) {
				s.SessionAffinity, s.AffinityTimeout = localnode.AffinityClientIP, 3*time.Hour
			}, ep("10.1.0.1", true, true))},
			want: map[string]view{"10.96.0.10:80/6": {Endpoints: []string{"10.1.0.1:8080"}, Affinity: 10800}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeMaps(t)
			d := backend.NewDiffer(NewBackend(f.maps(), nodeIPs, nil))
			st := &localnode.State{Family: localnode.IPv4, Services: tc.svcs}
			st.Normalize()
			if err := d.Sync(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, f.view()); diff != "" {
				t.Errorf("maps (-want +got):\n%s", diff)
			}
			// Deleting everything empties every map.
			if err := d.Sync(context.Background(), &localnode.State{Family: localnode.IPv4}); err != nil {
				t.Fatal(err)
			}
			if len(f.fe)+len(f.sets)+len(f.be) != 0 {
				t.Errorf("after deleting every service: frontends %v sets %v backends %v", f.fe, f.sets, f.be)
			}
		})
	}
}

func TestBackendIncrementalAndRetry(t *testing.T) {
	f := newFakeMaps(t)
	d := backend.NewDiffer(NewBackend(f.maps(), nil, nil))
	ctx := context.Background()
	sync := func(eps ...localnode.Endpoint) error {
		st := &localnode.State{Family: localnode.IPv4, Services: []localnode.Service{svcOf("web", localnode.TCP, "10.96.0.10", nil, eps...)}}
		st.Normalize()
		return d.Sync(ctx, st)
	}
	if err := sync(ep("10.1.0.1", true, true), ep("10.1.0.2", true, true)); err != nil {
		t.Fatal(err)
	}
	// One endpoint change is a handful of writes: the count and the slot, no frontend.
	f.log = nil
	if err := sync(ep("10.1.0.2", true, true)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"put be 1/0 10.1.0.2:8080", "put set 1 count=1", "del be 1/1"}; !slices.Equal(f.log, want) {
		t.Errorf("one endpoint removed: ops %q, want %q", f.log, want)
	}
	// A failed write leaves the service pending; the next sync applies it.
	f.failNext = "put"
	if err := sync(ep("10.1.0.2", true, true), ep("10.1.0.3", true, true)); !errors.Is(err, errInjected) {
		t.Fatalf("sync with a failing map: %v, want the injected error", err)
	}
	// proxyrun retries with the same State: the differ finds nothing new and only
	// calls the barrier, which must apply what was recorded.
	if err := sync(ep("10.1.0.2", true, true), ep("10.1.0.3", true, true)); err != nil {
		t.Fatal(err)
	}
	want := map[string]view{"10.96.0.10:80/6": {Endpoints: []string{"10.1.0.2:8080", "10.1.0.3:8080"}}}
	if diff := cmp.Diff(want, f.view()); diff != "" {
		t.Errorf("after retry (-want +got):\n%s", diff)
	}
}

func TestBackendAdoptsPreviousRun(t *testing.T) {
	f := newFakeMaps(t)
	m := f.maps()
	// A previous run's maps: web (which this run still has) and gone (which it has not).
	web, gone := makeFeKey(netip.MustParseAddr("10.96.0.10"), 80, protoTCP), makeFeKey(netip.MustParseAddr("10.96.0.99"), 80, protoTCP)
	for id, k := range map[uint32]feKey{7: web, 8: gone} {
		if _, err := m.writeSet(id, nil, aps("10.1.0.9:8080"), setVal{}); err != nil {
			t.Fatal(err)
		}
		if err := m.Frontends.Put(k, feVal{SetID: id}); err != nil {
			t.Fatal(err)
		}
	}
	// And a set without a frontend: the previous run stopped in between.
	if _, err := m.writeSet(9, nil, aps("10.1.0.8:8080"), setVal{}); err != nil {
		t.Fatal(err)
	}
	adopted := &Adopted{Frontends: map[feKey]uint32{web: 7, gone: 8}, Sets: map[uint32]setVal{7: f.sets[7], 8: f.sets[8], 9: f.sets[9]}}
	b := NewBackend(m, nil, adopted)
	if b.nextID != 10 {
		t.Errorf("next set id %d, want 10 (past every adopted one)", b.nextID)
	}
	st := &localnode.State{Family: localnode.IPv4, Services: []localnode.Service{svcOf("web", localnode.TCP, "10.96.0.10", nil, ep("10.1.0.1", true, true))}}
	if err := backend.NewDiffer(b).Sync(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	want := map[string]view{"10.96.0.10:80/6": {Endpoints: []string{"10.1.0.1:8080"}}}
	if diff := cmp.Diff(want, f.view()); diff != "" {
		t.Errorf("maps (-want +got):\n%s", diff)
	}
	if len(f.sets) != 1 || len(f.be) != 1 {
		t.Errorf("adopted sets left behind: sets %v backends %v", f.sets, f.be)
	}
}

// TestBackendSCTPFallsThrough: SCTP services of every kind (with and without
// endpoints, NodePort, externalIPs, LB VIPs, affinity), in both families, leave no
// frontend, set or backend slot in the maps, so their traffic meets the nftables
// rules; an SCTP frontend a previous run wrote is removed by the first sync.
func TestBackendSCTPFallsThrough(t *testing.T) {
	nodeIPs := []netip.Addr{netip.MustParseAddr("198.18.0.10"), netip.MustParseAddr("fd00::10")}
	external := func(s *localnode.Service) {
		s.NodePort = 30132
		s.ExternalIPs = []netip.Addr{netip.MustParseAddr("198.19.100.1")}
		s.LoadBalancerVIPs = []netip.Addr{netip.MustParseAddr("198.19.100.2")}
		s.SessionAffinity, s.AffinityTimeout = localnode.AffinityClientIP, time.Minute
	}
	external6 := func(s *localnode.Service) {
		s.NodePort = 30132
		s.ExternalIPs = []netip.Addr{netip.MustParseAddr("fd00::100:1")}
	}
	ep6 := func(ip string) localnode.Endpoint {
		return localnode.Endpoint{IP: netip.MustParseAddr(ip), Port: 8080, Ready: true, Serving: true, ForCluster: true, ForLocal: true}
	}
	f := newFakeMaps(t)
	m := f.maps()
	// What an earlier build, which wrote SCTP, left: a frontend and its set.
	old := makeFeKey(netip.MustParseAddr("10.96.0.54"), 80, protoSCTP)
	if _, err := m.writeSet(3, nil, aps("10.1.0.9:8080"), setVal{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Frontends.Put(old, feVal{SetID: 3}); err != nil {
		t.Fatal(err)
	}
	adopted := &Adopted{Frontends: map[feKey]uint32{old: 3}, Sets: map[uint32]setVal{3: f.sets[3]}}
	d := backend.NewDiffer(NewBackend(m, nodeIPs, adopted))
	for _, st := range []*localnode.State{
		{Family: localnode.IPv4, Services: []localnode.Service{
			svcOf("sig", localnode.SCTP, "10.96.0.54", external, ep("10.1.0.1", true, true), ep("10.1.0.2", true, false)),
			svcOf("sig-none", localnode.SCTP, "10.96.0.55", nil),
		}},
		{Family: localnode.IPv6, Services: []localnode.Service{
			svcOf("sig6", localnode.SCTP, "fd00::54", external6, ep6("fd00::1:1")),
		}},
	} {
		st.Normalize()
		if err := d.Sync(context.Background(), st); err != nil {
			t.Fatal(err)
		}
	}
	for k := range f.fe {
		if k.Proto == protoSCTP {
			t.Errorf("SCTP frontend %s in the maps", k)
		}
	}
	if len(f.fe)+len(f.sets)+len(f.be) != 0 {
		t.Errorf("maps hold entries for SCTP-only services: frontends %v sets %v backends %v", f.fe, f.sets, f.be)
	}
	for _, dst := range []string{"10.96.0.54:80", "198.18.0.10:30132", "10.96.0.55:80", "[fd00::54]:80"} {
		if got, err := f.readMaps().Lookup(netip.MustParseAddrPort(dst), localnode.SCTP); err != nil || got != nil {
			t.Errorf("read back %s/sctp: %+v, %v; want no translation", dst, got, err)
		}
	}
}

func (m fakeMap) Lookup(key, valueOut any) error {
	var ok bool
	switch m.name {
	case "frontends":
		var id uint32
		id, ok = m.f.fe[key.(feKey)]
		*valueOut.(*feVal) = feVal{SetID: id}
	case "sets":
		var v setVal
		v, ok = m.f.sets[key.(uint32)]
		*valueOut.(*setVal) = v
	case "backends":
		var v beVal
		v, ok = m.f.be[key.(beKey)]
		*valueOut.(*beVal) = v
	}
	if !ok {
		return errNotFound
	}
	return nil
}

func (f *fakeMaps) readMaps() *ReadMaps {
	return &ReadMaps{Frontends: fakeMap{f, "frontends"}, Sets: fakeMap{f, "sets"}, Backends: fakeMap{f, "backends"},
		NotFound: func(err error) bool { return errors.Is(err, errNotFound) }}
}

func TestReadBack(t *testing.T) {
	f := newFakeMaps(t)
	d := backend.NewDiffer(NewBackend(f.maps(), []netip.Addr{netip.MustParseAddr("198.18.0.10")}, nil))
	st := &localnode.State{Family: localnode.IPv4, Services: []localnode.Service{
		svcOf("web", localnode.TCP, "10.96.0.10", func(s *localnode.Service) {
			s.NodePort = 30080
			s.SessionAffinity, s.AffinityTimeout = localnode.AffinityClientIP, time.Minute
		}, ep("10.1.0.1", true, true)),
		svcOf("none", localnode.UDP, "10.96.0.11", nil),
	}}
	st.Normalize()
	if err := d.Sync(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dst   string
		proto localnode.Protocol
		want  *Translation
	}{
		{"10.96.0.10:80", localnode.TCP, &Translation{Endpoints: aps("10.1.0.1:8080"), AffinityTimeout: time.Minute}},
		{"198.18.0.10:30080", localnode.TCP, &Translation{Endpoints: aps("10.1.0.1:8080"), AffinityTimeout: time.Minute}},
		{"[::ffff:10.96.0.10]:80", localnode.TCP, &Translation{Endpoints: aps("10.1.0.1:8080"), AffinityTimeout: time.Minute}},
		{"10.96.0.10:80", localnode.UDP, nil},
		{"10.96.0.11:80", localnode.UDP, &Translation{Reject: true}},
		{"10.96.0.99:80", localnode.TCP, nil},
	} {
		t.Run(tc.dst+"/"+string(tc.proto), func(t *testing.T) {
			got, err := f.readMaps().Lookup(netip.MustParseAddrPort(tc.dst), tc.proto)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(x, y netip.AddrPort) bool { return x == y })); diff != "" {
				t.Errorf("translation (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanSlotsProperties checks, over random old and new endpoint lists of sizes that
// take both the linear and the map path, that the slots are a permutation of want and
// that an endpoint that stays keeps its slot unless it had to move down into a hole.
func TestPlanSlotsProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(n int) []netip.AddrPort {
		var out []netip.AddrPort
		for _, i := range rng.Perm(60)[:n] {
			out = append(out, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 80))
		}
		return out
	}
	for iter := 0; iter < 2000; iter++ {
		old, want := pick(rng.IntN(40)), pick(rng.IntN(40))
		got := planSlots(old, want)
		if !slices.Equal(slices.SortedFunc(slices.Values(got), netip.AddrPort.Compare), slices.SortedFunc(slices.Values(want), netip.AddrPort.Compare)) {
			t.Fatalf("planSlots(%v, %v) = %v: not a permutation of want", old, want, got)
		}
		for i, ap := range old {
			if i < len(got) && slices.Contains(want, ap) && got[i] != ap {
				t.Fatalf("planSlots(%v, %v) = %v: %s moved from slot %d though it stays", old, want, got, ap, i)
			}
		}
	}
}
