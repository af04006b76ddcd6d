//go:build linux

package nftables

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/features"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// inNetns runs fn on an OS thread moved into a fresh network namespace, so
// nft (a child process forked from that thread) and netlink only ever see the
// test's private namespace. The thread is never returned to the scheduler:
// when the goroutine exits still locked, Go destroys the thread.
func inNetns(t testing.TB, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace and run nft")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft binary not found")
	}
	done := make(chan struct{})
	var setupErr error
	go func() {
		defer close(done)
		runtime.LockOSThread()
		ns, err := netns.New() // unshares this thread only, and switches it
		if err != nil {
			setupErr = err
			return
		}
		defer func() { _ = ns.Close() }()
		fn()
	}()
	<-done
	if setupErr != nil {
		t.Skipf("cannot create a network namespace: %v", setupErr)
	}
}

// realSyncer builds a syncer on a real knftables interface and the netlink
// element writer. It must be called inside inNetns.
func realSyncer(t testing.TB, tf testFamily, mutate func(*syncerConfig)) (*syncer, knftables.Interface) {
	t.Helper()
	// UseNetlink as in production (gate NFTablesNetlink, on by default).
	nft, err := knftables.New(familyOf(tf.family), kubeProxyTable, knftables.UseNetlink)
	if err != nil {
		t.Skipf("nftables unusable here: %v", err)
	}
	s, _ := newTestSyncer(t, tf, mutate)
	s.nft = nft
	// Endpoint elements over netlink, as NewProxier sets up for the host's
	// table (nlbatch.go).
	w := newNetlinkElements(tf.family)
	t.Cleanup(w.close)
	s.elements = w
	// The drift check reads the table back over netlink, as NewProxier
	// sets up for the host's table (drift.go).
	r := newTableReader(tf.family == v1.IPv6Protocol)
	t.Cleanup(r.close)
	s.driftState.reader = r
	return s, nft
}

// snapshot reads the table back from a knftables interface: chains with
// their rules, and all set/map elements. The real ListRules does not return
// rule text (nft prints rules in its own canonical form anyway), so rules are
// compared by count and comment; tests check text with `nft list chain`.
func snapshot(t testing.TB, nft knftables.Interface) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	chains, err := nft.List(ctx, "chains")
	if err != nil {
		t.Fatalf("list chains: %v", err)
	}
	for _, ch := range chains {
		rules, err := nft.ListRules(ctx, ch)
		if err != nil {
			t.Fatalf("list rules of %s: %v", ch, err)
		}
		out = append(out, "chain "+ch)
		for _, r := range rules {
			c := "-"
			if r.Comment != nil {
				c = *r.Comment
			}
			out = append(out, "rule "+ch+" comment="+c)
		}
	}
	for _, kind := range []string{"set", "map"} {
		names, err := nft.List(ctx, kind+"s")
		if err != nil {
			t.Fatalf("list %ss: %v", kind, err)
		}
		for _, n := range names {
			out = append(out, kind+" "+n)
			elems, err := nft.ListElements(ctx, kind, n)
			if err != nil {
				t.Fatalf("list elements of %s: %v", n, err)
			}
			for _, e := range elems {
				out = append(out, "element "+n+" "+strings.Join(e.Key, " . ")+" : "+strings.Join(e.Value, " . "))
			}
		}
	}
	// Which endpoint map generation is current depends on how many full
	// syncs ran; the contents must not.
	for i := range out {
		out[i] = endpointGeneration.ReplaceAllString(out[i], endpointMapPrefix+"G-")
	}
	slices.Sort(out)
	return out
}

var endpointGeneration = regexp.MustCompile(endpointMapPrefix + `\d+-`)

// kernelChainEndpoints returns the "ip . port" endpoints the kernel's policy
// chain balances over, read through its endpoint map.
func kernelChainEndpoints(t testing.TB, nft knftables.Interface, tf testFamily, chain string) []string {
	t.Helper()
	out, err := exec.Command("nft", "list", "chain", string(familyOf(tf.family)), kubeProxyTable, chain).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list chain %s: %v: %s", chain, err, out)
	}
	m := regexp.MustCompile(`numgen random mod (\d+)(?: offset (\d+))? map @(\S+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("chain %s does not balance over an endpoint map:\n%s", chain, out)
	}
	n, _ := strconv.Atoi(m[1])
	base, _ := strconv.Atoi(m[2])
	elems, err := nft.ListElements(context.Background(), "map", m[3])
	if err != nil {
		t.Fatalf("listing %s: %v", m[3], err)
	}
	var eps []string
	for _, e := range elems {
		if slot, _ := strconv.Atoi(e.Key[0]); slot >= base && slot < base+n {
			eps = append(eps, strings.Join(e.Value, " . "))
		}
	}
	slices.Sort(eps)
	if len(eps) != n {
		t.Fatalf("chain %s balances over %d slots, the map holds %d of them: %v", chain, n, len(eps), eps)
	}
	return eps
}

func TestKernelFullAndPartialSync(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			inNetns(t, func() {
				ctx := context.Background()
				s, nft := realSyncer(t, tf, nil)
				ref, fake := newTestSyncer(t, tf, nil)

				svcs := append([]tsvc(nil), testServices...)
				for _, sy := range []*syncer{s, ref} {
					if _, err := sy.sync(ctx, syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
						t.Fatalf("full sync: %v", err)
					}
				}
				if diff := cmp.Diff(snapshot(t, fake), snapshot(t, nft)); diff != "" {
					t.Fatalf("kernel differs from the fake after a full sync (-fake +kernel):\n%s", diff)
				}

				// Partial: change endpoints of one service, remove another.
				svcs[1].eps = []tep{{ip: "10.180.5.5", port: 80}}
				removed := ownerOf(svcs[5])
				for _, sy := range []*syncer{s, ref} {
					// sync consumes the models, so each syncer gets its own.
					in := syncInput{services: models(tf.ip, svcs[1]), removed: []string{removed}}
					if _, err := sy.sync(ctx, in); err != nil {
						t.Fatalf("partial sync: %v", err)
					}
				}
				if diff := cmp.Diff(snapshot(t, fake), snapshot(t, nft)); diff != "" {
					t.Fatalf("kernel differs from the fake after a partial sync (-fake +kernel):\n%s", diff)
				}
				if got, want := kernelChainEndpoints(t, nft, tf, svcChain(tf, svcs[1])), []string{tf.ip("10.180.5.5") + " . 80"}; !slices.Equal(got, want) {
					t.Fatalf("service endpoints in the kernel: got %v, want %v", got, want)
				}

				// Stale chains are flushed now and deleted later.
				if err := s.deleteStaleChains(ctx, time.Now().Add(time.Hour), time.Second); err != nil {
					t.Fatalf("deleting stale chains: %v", err)
				}
				chains, _ := nft.List(ctx, "chains")
				if slices.Contains(chains, svcChain(tf, testServices[5])) {
					t.Errorf("stale chain of the removed service still exists")
				}
			})
		})
	}
}

func svcChain(tf testFamily, s tsvc) string {
	return s.model(tf.ip).clusterChain
}

func TestKernelChunkedColdStart(t *testing.T) {
	tf := families[0]
	inNetns(t, func() {
		ctx := context.Background()
		s, nft := realSyncer(t, tf, func(c *syncerConfig) { c.maxOps = 10 })
		ref, fake := newTestSyncer(t, tf, nil)
		res, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, testServices...)})
		if err != nil {
			t.Fatalf("chunked sync: %v", err)
		}
		if res.transactions < 5 {
			t.Errorf("expected many transactions with maxOps=10, got %+v", res)
		}
		if _, err := ref.sync(ctx, syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(snapshot(t, fake), snapshot(t, nft)); diff != "" {
			t.Fatalf("chunked kernel result differs (-fake +kernel):\n%s", diff)
		}
	})
}

// TestKernelRejectedTransaction feeds the kernel a transaction it refuses
// (an element that is not an address) and checks that the previous ruleset
// survives untouched and that the next full sync repairs everything.
func TestKernelRejectedTransaction(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			inNetns(t, func() {
				ctx := context.Background()
				s, nft := realSyncer(t, tf, nil)
				svcs := append([]tsvc(nil), testServices...)
				if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
					t.Fatal(err)
				}
				before := snapshot(t, nft)

				good := svcs[0]
				good.eps = []tep{{ip: "10.180.7.7", port: 80}}
				bad := tsvc{ns: "bad", name: "bad", portName: "p", clusterIP: "172.30.0.200", port: 80, eps: []tep{{ip: "10.180.7.8", port: 80}}}
				badModel := bad.model(tf.ip)
				badModel.clusterIP = "not-an-ip"
				in := syncInput{services: append(models(tf.ip, good), badModel)}
				if _, err := s.sync(ctx, in); err == nil {
					t.Fatal("kernel accepted an invalid element")
				}
				if diff := cmp.Diff(before, snapshot(t, nft)); diff != "" {
					t.Fatalf("rejected transaction changed the kernel ruleset:\n%s", diff)
				}

				// Next sync: full (as the proxier does after a failure), without the bad input.
				svcs[0] = good
				if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
					t.Fatalf("repair sync: %v", err)
				}
				ref, fake := newTestSyncer(t, tf, nil)
				if _, err := ref.sync(ctx, syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
					t.Fatal(err)
				}
				if err := s.deleteStaleChains(ctx, time.Now().Add(time.Hour), time.Second); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(snapshot(t, fake), snapshot(t, nft)); diff != "" {
					t.Fatalf("full sync did not repair the kernel (-want +kernel):\n%s", diff)
				}
			})
		})
	}
}

func TestKernelCleanup(t *testing.T) {
	inNetns(t, func() {
		ctx := context.Background()
		for _, tf := range families {
			s, _ := realSyncer(t, tf, nil)
			if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
				t.Fatal(err)
			}
		}
		if CleanupLeftovers(ctx) {
			t.Fatal("CleanupLeftovers reported an error")
		}
		out, err := exec.Command("nft", "list", "tables").CombinedOutput()
		if err != nil || strings.Contains(string(out), kubeProxyTable) {
			t.Fatalf("tables left after cleanup: %s %v", out, err)
		}
	})
}

var _ = v1.IPv4Protocol

func TestKernelRejectCounters(t *testing.T) {
	tf := families[0]
	inNetns(t, func() {
		ctx := context.Background()
		s, nft := realSyncer(t, tf, func(c *syncerConfig) {
			c.localhostEnabled = true
			c.rejectProtocols = []v1.Protocol{v1.ProtocolUDP, v1.ProtocolSCTP}
		})
		if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
			t.Fatal(err)
		}
		got, err := counterReader{nft: nft}.ReadCounters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]uint64{"localhost-nodeport-rejected-udp": 0, "localhost-nodeport-rejected-sctp": 0}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("counters (-want +got):\n%s", diff)
		}
	})
}

// TestKernelProxier drives the whole Proxier (trackers, brain, syncer) against
// the real kernel, with the localhost NodePort gate on, and checks the table
// the kernel ends up with against the same Proxier run on the fake.
func TestKernelProxier(t *testing.T) {
	if err := features.DefaultMutableFeatureGate.Set("KubeProxyNFTablesLocalhostNodePorts=true"); err != nil {
		t.Skipf("cannot enable the gate: %v", err)
	}
	t.Cleanup(func() { _ = features.DefaultMutableFeatureGate.Set("KubeProxyNFTablesLocalhostNodePorts=false") })
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			inNetns(t, func() {
				nft, err := knftables.New(familyOf(tf.family), kubeProxyTable, knftables.UseNetlink)
				if err != nil {
					t.Skipf("nftables unusable here: %v", err)
				}
				real, _ := newTestProxier(t, tf, nil)
				real.syncer.nft = nft
				ref, fake := newTestProxier(t, tf, nil)
				ip := tf.ip
				svc := st.NewService("ns1", "web", func(s *v1.Service) {
					s.Spec.Type = v1.ServiceTypeNodePort
					s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.41"), []string{ip("172.30.0.41")}, []v1.IPFamily{tf.family}
					s.Spec.Ports = []v1.ServicePort{
						{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 3001},
						{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, NodePort: 3053},
					}
					s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				})
				es := st.NewSlice("ns1", "web", "web-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
					es.Ports = []discovery.EndpointPort{
						{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)},
						{Name: ptr.To("dns"), Port: ptr.To[int32](5353), Protocol: ptr.To(v1.ProtocolUDP)},
					}
					es.Endpoints = []discovery.Endpoint{st.EndpointWith(ip("10.180.0.1"), testNodeName, true, true, false), st.EndpointWith(ip("10.180.1.1"), "node2", true, true, false)}
				})
				for _, p := range []*Proxier{real, ref} {
					startProxier(p, []*v1.Service{svc}, []*discovery.EndpointSlice{es})
				}
				if diff := cmp.Diff(snapshot(t, fake), snapshot(t, nft)); diff != "" {
					t.Fatalf("kernel differs from fake (-fake +kernel):\n%s", diff)
				}
				// Delete the service: partial sync, then stale chain deletion.
				for _, p := range []*Proxier{real, ref} {
					p.OnServiceDelete(svc)
					if err := p.SyncNow(); err != nil {
						t.Fatal(err)
					}
					if err := p.syncer.deleteStaleChains(context.Background(), time.Now().Add(time.Hour), time.Second); err != nil {
						t.Fatal(err)
					}
				}
				if diff := cmp.Diff(snapshot(t, fake), snapshot(t, nft)); diff != "" {
					t.Fatalf("kernel differs from fake after delete (-fake +kernel):\n%s", diff)
				}
			})
		})
	}
}

// TestKernelRestartSwitchesGeneration: a second proxier over an existing
// table (a restart) writes its endpoint maps under a new generation in many
// small transactions, and the kernel accepts deleting the old maps at the end
// (no rule still refers to them). The result equals a fresh sync.
func TestKernelRestartSwitchesGeneration(t *testing.T) {
	tf := families[0]
	inNetns(t, func() {
		ctx := context.Background()
		first, nft := realSyncer(t, tf, nil)
		if _, err := first.sync(ctx, syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
			t.Fatal(err)
		}
		before, _ := nft.List(ctx, "maps")

		restarted, _ := realSyncer(t, tf, func(c *syncerConfig) { c.maxOps = 8 })
		reversed := slices.Clone(testServices)
		slices.Reverse(reversed)
		res, err := restarted.sync(ctx, syncInput{full: true, services: models(tf.ip, reversed...)})
		if err != nil {
			t.Fatalf("restart sync: %v", err)
		}
		if res.transactions < 5 {
			t.Errorf("want a chunked restart sync, got %+v", res)
		}
		after, _ := nft.List(ctx, "maps")
		for _, name := range before {
			if endpointMapGeneration(name) >= 0 && slices.Contains(after, name) {
				t.Errorf("old endpoint map %s still exists", name)
			}
		}
		ref, fake := newTestSyncer(t, tf, nil)
		if _, err := ref.sync(ctx, syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(snapshot(t, fake), snapshot(t, nft)); diff != "" {
			t.Fatalf("kernel after the restart differs from a fresh sync (-fresh +kernel):\n%s", diff)
		}
		if got, want := kernelChainEndpoints(t, nft, tf, svcChain(tf, testServices[1])), []string{tf.ip("10.180.0.2") + " . 80", tf.ip("10.180.1.2") + " . 80"}; !slices.Equal(got, want) {
			t.Errorf("svc2 endpoints in the kernel after the restart: got %v, want %v", got, want)
		}
	})
}

// The real nft can declare endpoint maps, and asking it changes nothing.
func TestKernelEndpointMapCheck(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			inNetns(t, func() {
				s, nft := realSyncer(t, tf, nil)
				if err := s.checkEndpointMaps(context.Background()); err != nil {
					t.Fatalf("nft cannot declare endpoint maps: %v", err)
				}
				if _, err := nft.List(context.Background(), "maps"); err == nil || !isNotFound(err) {
					t.Errorf("the check created the table (listing maps: %v)", err)
				}
			})
		})
	}
}
