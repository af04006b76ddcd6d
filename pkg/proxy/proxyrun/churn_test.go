package proxyrun

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// churn is a synthetic API event stream over a cluster of services of four kinds, seen
// from node-a in zone z1. Most events change nothing this node programs, as in a real
// cluster: resourceVersion-only updates, label and annotation edits, other nodes'
// endpoints of internal-Local services, endpoints hinted for other zones. The rest do:
// endpoint changes of Cluster-policy services and this node's endpoints turning unready.
type churn struct {
	src      *source.Static
	r        *rand.Rand
	services []*v1.Service
	slices   []*discovery.EndpointSlice
	kinds    []svcKind
	nextIP   uint32
	rv       int
}

type svcKind int

const (
	plainCluster  svcKind = iota // Cluster policies, no hints: every endpoint matters
	internalLocal                // internalTrafficPolicy Local: only node-a's endpoints matter
	externalLocal                // LoadBalancer with eTP Local (internal Cluster): all matter
	zoneHinted                   // every endpoint hinted for its zone: only z1's matter
	numKinds
)

const churnNode = "node-a"

var churnNodes = []string{churnNode, "node-b", "node-c", "node-d", "node-e", "node-f"}

// eventKind is one kind of API event with its weight in the stream and whether it can
// change node-a's State.
type eventKind struct {
	name     string
	weight   int
	relevant bool
	apply    func(c *churn) bool // false when it found nothing to change
}

var eventKinds = []eventKind{
	{"service resourceVersion-only update", 25, false, (*churn).touchService},
	{"slice resourceVersion-only update", 25, false, (*churn).touchSlice},
	{"service label/annotation edit", 10, false, (*churn).labelService},
	{"other node's endpoint of an internal-Local service", 15, false, (*churn).moveRemoteOfInternalLocal},
	{"endpoint hinted for another zone", 10, false, (*churn).moveOtherZone},
	{"endpoint of a Cluster-policy service", 10, true, (*churn).movePlain},
	{"node-a's endpoint readiness flip", 5, true, (*churn).flipLocal},
}

func newChurn(src *source.Static, services int, seed uint64) *churn {
	c := &churn{src: src, r: rand.New(rand.NewPCG(seed, 1)), nextIP: 1}
	src.SetNode(st.Node(churnNode, "z1"))
	for i := range services {
		kind := svcKind(i % int(numKinds))
		name := fmt.Sprintf("svc-%d", i)
		ip := fmt.Sprintf("10.%d.%d.%d", 96+i/65536, (i/256)%256, i%256)
		var mutate []func(*v1.Service)
		switch kind {
		case internalLocal:
			mutate = append(mutate, st.InternalLocal())
		case externalLocal:
			mutate = append(mutate, st.LoadBalancer(int32(30000+i%2000), fmt.Sprintf("192.0.%d.%d", (i/256)%256, i%256)), st.ExternalLocal(int32(32000+i%700)))
		}
		svc := st.Service("ns", name, []string{ip}, mutate...)
		var eps []discovery.Endpoint
		for e := range 6 {
			node := churnNodes[(i+e)%len(churnNodes)]
			var m []func(*discovery.Endpoint)
			if kind == zoneHinted {
				m = append(m, st.Zone("z"+strconv.Itoa(e%3+1), true))
			}
			eps = append(eps, st.Endpoint(c.ip(), node, m...))
		}
		slice := st.EndpointSlice("ns", name, name+"-1", "http", 8080, eps...)
		c.services, c.slices, c.kinds = append(c.services, svc), append(c.slices, slice), append(c.kinds, kind)
		src.SetService(svc)
		src.SetEndpointSlice(slice)
	}
	return c
}

func (c *churn) ip() string {
	n := c.nextIP
	c.nextIP++
	return fmt.Sprintf("172.%d.%d.%d", 16+n>>16&0x0f, n>>8&0xff, n&0xff)
}

func (c *churn) nextRV() string {
	c.rv++
	return strconv.Itoa(c.rv + 1)
}

// step applies one random event and returns its kind.
func (c *churn) step() eventKind {
	total := 0
	for _, k := range eventKinds {
		total += k.weight
	}
	for {
		n := c.r.IntN(total)
		for _, k := range eventKinds {
			if n < k.weight {
				if k.apply(c) {
					return k
				}
				break
			}
			n -= k.weight
		}
	}
}

func (c *churn) pick(kind svcKind) int {
	for {
		i := c.r.IntN(len(c.services))
		if kind < 0 || c.kinds[i] == kind {
			return i
		}
	}
}

func (c *churn) setService(i int, mutate func(*v1.Service)) {
	svc := c.services[i].DeepCopy()
	mutate(svc)
	svc.ResourceVersion = c.nextRV()
	c.services[i] = svc
	c.src.SetService(svc)
}

func (c *churn) setSlice(i int, mutate func(*discovery.EndpointSlice)) {
	s := c.slices[i].DeepCopy()
	mutate(s)
	s.ResourceVersion = c.nextRV()
	c.slices[i] = s
	c.src.SetEndpointSlice(s)
}

func (c *churn) touchService() bool {
	c.setService(c.pick(-1), func(*v1.Service) {})
	return true
}

func (c *churn) touchSlice() bool {
	c.setSlice(c.pick(-1), func(*discovery.EndpointSlice) {})
	return true
}

func (c *churn) labelService() bool {
	c.setService(c.pick(-1), func(s *v1.Service) {
		s.Labels = map[string]string{"deploy": strconv.Itoa(c.r.IntN(1000))}
		s.Annotations = map[string]string{"last-applied": strconv.Itoa(c.r.IntN(1000))}
	})
	return true
}

// replaceEndpoint gives one endpoint of slice i matching keep a new address (a pod
// replaced by another).
func (c *churn) replaceEndpoint(i int, keep func(*discovery.Endpoint) bool) bool {
	var idx []int
	for j := range c.slices[i].Endpoints {
		if keep(&c.slices[i].Endpoints[j]) {
			idx = append(idx, j)
		}
	}
	if len(idx) == 0 {
		return false
	}
	j := idx[c.r.IntN(len(idx))]
	c.setSlice(i, func(s *discovery.EndpointSlice) { s.Endpoints[j].Addresses = []string{c.ip()} })
	return true
}

func (c *churn) moveRemoteOfInternalLocal() bool {
	return c.replaceEndpoint(c.pick(internalLocal), func(e *discovery.Endpoint) bool { return *e.NodeName != churnNode })
}

func (c *churn) moveOtherZone() bool {
	return c.replaceEndpoint(c.pick(zoneHinted), func(e *discovery.Endpoint) bool { return *e.Zone != "z1" })
}

func (c *churn) movePlain() bool {
	return c.replaceEndpoint(c.pick(plainCluster), func(*discovery.Endpoint) bool { return true })
}

func (c *churn) flipLocal() bool {
	i := c.pick(internalLocal)
	for j := range c.slices[i].Endpoints {
		if *c.slices[i].Endpoints[j].NodeName == churnNode {
			ready := !*c.slices[i].Endpoints[j].Conditions.Ready
			c.setSlice(i, func(s *discovery.EndpointSlice) {
				s.Endpoints[j].Conditions.Ready = &ready
				s.Endpoints[j].Conditions.Serving = &ready
			})
			return true
		}
	}
	return false
}

// newChurnProxy returns a Proxy attached to a churn stream over services, already synced
// once.
func newChurnProxy(tb testing.TB, services int, b backend.FullState) (*Proxy, *churn) {
	tb.Helper()
	p, err := New(b, Options{NodeName: churnNode})
	if err != nil {
		tb.Fatal(err)
	}
	src := source.NewStatic()
	c := newChurn(src, services, 42)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = src.Run(ctx, p)
	}()
	tb.Cleanup(func() { cancel(); <-done })
	for !p.synced() {
		// Static delivers its initial objects synchronously once Run starts.
		time.Sleep(time.Millisecond)
	}
	if err := p.Sync(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return p, c
}

// TestChurnRelevance checks the premise of the event-reduction figure event by event:
// no event of a kind marked irrelevant produces a revision, and the relevant ones do.
func TestChurnRelevance(t *testing.T) {
	revisions := 0
	b := backend.FullStateFunc(func(context.Context, *localnode.State) error { revisions++; return nil })
	p, c := newChurnProxy(t, 200, b)
	byKind := map[string][2]int{} // events, revisions
	for range 2000 {
		before := revisions
		k := c.step()
		if err := p.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := revisions - before
		counts := byKind[k.name]
		counts[0]++
		counts[1] += got
		byKind[k.name] = counts
		if !k.relevant && got != 0 {
			t.Fatalf("irrelevant event %q produced a revision", k.name)
		}
		if k.relevant && got != 1 {
			t.Fatalf("relevant event %q produced %d revisions, want 1", k.name, got)
		}
	}
	for _, k := range eventKinds {
		t.Logf("%-52s events %4d revisions %4d", k.name, byKind[k.name][0], byKind[k.name][1])
	}
}

// BenchmarkEventReduction measures node-local revisions per API event on the churn stream
// over 1000 services, syncing after every event (every relevant event is its own
// revision) and, separately, after every 20 events (a busy cluster under a min sync
// interval, where several changes fold into one revision).
func BenchmarkEventReduction(b *testing.B) {
	for _, batch := range []int{1, 20} {
		b.Run(fmt.Sprintf("syncEvery=%d", batch), func(b *testing.B) {
			revisions := 0
			be := backend.FullStateFunc(func(context.Context, *localnode.State) error { revisions++; return nil })
			p, c := newChurnProxy(b, 1000, be)
			revisions = 0
			start := p.Stats().Events
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				c.step()
				if (i+1)%batch == 0 {
					if err := p.Sync(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
			}
			events := p.Stats().Events - start
			b.ReportMetric(float64(revisions)/float64(events), "revisions/event")
		})
	}
}

// BenchmarkFullStateSync10k measures one revision at 10,000 services (6 endpoints each):
// an endpoint of one service changes, and Sync brings the change through the trackers,
// computes the node-local State and hands it to the backend. The backend is a no-op
// FullState, or the Differ adapter feeding a no-op Incremental (the cost of turning full
// states into minimal calls).
func BenchmarkFullStateSync10k(b *testing.B) {
	backends := map[string]func() backend.FullState{
		"full": func() backend.FullState {
			return backend.FullStateFunc(func(context.Context, *localnode.State) error { return nil })
		},
		"differ": func() backend.FullState { return backend.NewDiffer(nopIncremental{}) },
	}
	for _, name := range []string{"full", "differ"} {
		b.Run(name, func(b *testing.B) {
			p, c := newChurnProxy(b, 10000, backends[name]())
			before := p.Stats().Revisions
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c.movePlain()
				if err := p.Sync(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if got := p.Stats().Revisions - before; got != uint64(b.N) {
				b.Fatalf("%d revisions for %d changes", got, b.N)
			}
		})
	}
}

type nopIncremental struct{}

func (nopIncremental) SetService(localnode.Family, *backend.ServiceInfo)                    {}
func (nopIncremental) DeleteService(localnode.Family, localnode.PortName)                   {}
func (nopIncremental) SetEndpoint(localnode.Family, localnode.PortName, localnode.Endpoint) {}
func (nopIncremental) DeleteEndpoint(localnode.Family, localnode.PortName, netip.AddrPort)  {}
func (nopIncremental) Sync(context.Context) error                                           { return nil }

func waitSynced() { time.Sleep(time.Millisecond) }
