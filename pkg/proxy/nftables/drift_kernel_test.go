//go:build linux

package nftables

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	proxyutiltest "k8s.io/kube-proxy/pkg/proxy/util/testing"
)

// nftRun runs the nft binary (in the test's network namespace: inNetns'
// thread forks it) and fails the test if nft does.
func nftRun(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("nft", args...).CombinedOutput(); err != nil {
		t.Fatalf("nft %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// ruleHandles returns the handles of chain's rules, in order.
func ruleHandles(t testing.TB, nft knftables.Interface, chain string) []int {
	t.Helper()
	rules, err := nft.ListRules(context.Background(), chain)
	if err != nil {
		t.Fatalf("listing the rules of %s: %v", chain, err)
	}
	var out []int
	for _, r := range rules {
		out = append(out, *r.Handle)
	}
	return out
}

// driftEnv is what an outside change acts on.
type driftEnv struct {
	tf  testFamily
	fam string // "ip" or "ip6", the table's family
	s   *syncer
	nft knftables.Interface
}

// TestKernelDriftRepaired: every kind of change made behind kube-proxy's
// back is found by one drift check, named by kind and object, and the full
// sync that check triggers (what the Shell does on any drift) puts back
// exactly what a clean sync programs; the check after the repair finds
// nothing. With the check switched off (drift returning nothing) every case
// fails at "the check found nothing".
func TestKernelDriftRepaired(t *testing.T) {
	svc1, svc2 := testServices[0], testServices[1]
	for _, tc := range []struct {
		name       string
		change     func(t *testing.T, e *driftEnv)
		wantKind   string
		wantObject func(e *driftEnv) string
	}{{
		name: "a rule deleted from a service chain",
		change: func(t *testing.T, e *driftEnv) {
			chain := svcChain(e.tf, svc2)
			h := ruleHandles(t, e.nft, chain)
			nftRun(t, "delete", "rule", e.fam, kubeProxyTable, chain, "handle", strconv.Itoa(h[len(h)-1]))
		},
		wantKind:   driftRule,
		wantObject: func(e *driftEnv) string { return svcChain(e.tf, svc2) },
	}, {
		name: "a rule added to one of our chains",
		change: func(t *testing.T, e *driftEnv) {
			nftRun(t, "insert", "rule", e.fam, kubeProxyTable, servicesChain, e.fam, "daddr", e.tf.ip("192.0.2.1"), "drop")
		},
		wantKind:   driftRule,
		wantObject: func(*driftEnv) string { return servicesChain },
	}, {
		name:       "a chain flushed",
		change:     func(t *testing.T, e *driftEnv) { nftRun(t, "flush", "chain", e.fam, kubeProxyTable, servicesChain) },
		wantKind:   driftRule,
		wantObject: func(*driftEnv) string { return servicesChain },
	}, {
		name: "a rule replaced by another with the same comment",
		change: func(t *testing.T, e *driftEnv) {
			h := ruleHandles(t, e.nft, clusterIPsCheckChain)
			nftRun(t, "replace", "rule", e.fam, kubeProxyTable, clusterIPsCheckChain, "handle", strconv.Itoa(h[0]),
				e.fam, "daddr", "@"+clusterIPsSet, "accept", "comment", `"Reject traffic to invalid ports of ClusterIPs"`)
		},
		wantKind:   driftRule,
		wantObject: func(*driftEnv) string { return clusterIPsCheckChain },
	}, {
		name: "an element deleted from the cluster IPs set",
		change: func(t *testing.T, e *driftEnv) {
			nftRun(t, "delete", "element", e.fam, kubeProxyTable, clusterIPsSet, "{", e.tf.ip(svc1.clusterIP), "}")
		},
		wantKind:   driftSetElement,
		wantObject: func(e *driftEnv) string { return clusterIPsSet + " " + e.tf.ip(svc1.clusterIP) },
	}, {
		name: "an element deleted from the service-ips verdict map",
		change: func(t *testing.T, e *driftEnv) {
			nftRun(t, "delete", "element", e.fam, kubeProxyTable, serviceIPsMap, "{", e.tf.ip(svc1.clusterIP), ".", "tcp", ".", "80", "}")
		},
		wantKind:   driftMapElement,
		wantObject: func(e *driftEnv) string { return serviceIPsMap + " " + e.tf.ip(svc1.clusterIP) + " . tcp . 80" },
	}, {
		name: "an element added to the service-ips map by someone else",
		change: func(t *testing.T, e *driftEnv) {
			nftRun(t, "add", "element", e.fam, kubeProxyTable, serviceIPsMap, "{", e.tf.ip("172.30.0.99"), ".", "tcp", ".", "80", ":", "goto", svcChain(e.tf, svc1), "}")
		},
		wantKind:   driftMapElement,
		wantObject: func(e *driftEnv) string { return serviceIPsMap + " " + e.tf.ip("172.30.0.99") + " . tcp . 80" },
	}, {
		name: "an endpoint deleted from an endpoint map",
		change: func(t *testing.T, e *driftEnv) {
			spec := e.s.view.epSlots.have[svcChain(e.tf, svc1)]
			name := endpointMapName(e.s.view.epGen, spec.mapIndex)
			nftRun(t, "delete", "element", e.fam, kubeProxyTable, name, "{", strconv.FormatUint(uint64(spec.base), 10), "}")
		},
		wantKind: driftMapElement,
		wantObject: func(e *driftEnv) string {
			spec := e.s.view.epSlots.have[svcChain(e.tf, svc1)]
			return endpointMapName(e.s.view.epGen, spec.mapIndex) + " " + strconv.FormatUint(uint64(spec.base), 10)
		},
	}, {
		name: "an element deleted from the nodeport-ips set",
		change: func(t *testing.T, e *driftEnv) {
			nftRun(t, "delete", "element", e.fam, kubeProxyTable, nodePortIPsSet, "{", e.tf.nodeIP, "}")
		},
		wantKind:   driftSetElement,
		wantObject: func(e *driftEnv) string { return nodePortIPsSet + " " + e.tf.nodeIP },
	}, {
		name: "a base chain deleted",
		change: func(t *testing.T, e *driftEnv) {
			nftRun(t, "delete", "chain", e.fam, kubeProxyTable, natPreroutingChain)
		},
		wantKind:   driftChain,
		wantObject: func(*driftEnv) string { return natPreroutingChain },
	}, {
		name: "a chain with a generated name added",
		change: func(t *testing.T, e *driftEnv) {
			nftRun(t, "add", "chain", e.fam, kubeProxyTable, "service-AAAAAAAA-ns9/svc9/tcp/p80")
		},
		wantKind:   driftChain,
		wantObject: func(*driftEnv) string { return "service-AAAAAAAA-ns9/svc9/tcp/p80" },
	}, {
		name:       "the whole table deleted",
		change:     func(t *testing.T, e *driftEnv) { nftRun(t, "delete", "table", e.fam, kubeProxyTable) },
		wantKind:   driftTable,
		wantObject: func(e *driftEnv) string { return e.fam + " " + kubeProxyTable },
	}} {
		for _, tf := range families {
			t.Run(tc.name+"/"+string(tf.family), func(t *testing.T) {
				inNetns(t, func() {
					ctx := context.Background()
					s, nft := realSyncer(t, tf, nil)
					ref, fake := newTestSyncer(t, tf, nil)
					ms := func() []*serviceModel { return models(tf.ip, testServices...) }
					for _, sy := range []*syncer{s, ref} {
						if _, err := sy.sync(ctx, syncInput{full: true, services: ms()}); err != nil {
							t.Fatalf("full sync: %v", err)
						}
					}
					// The first check after our write finds nothing and
					// learns the rules' fingerprints.
					if d, err := s.drift(ctx); err != nil || len(d) != 0 {
						t.Fatalf("check after a clean sync: drift %v, err %v; want none", d, err)
					}
					e := &driftEnv{tf: tf, fam: string(familyOf(tf.family)), s: s, nft: nft}
					want := syncshell.Drift{Kind: tc.wantKind, Object: tc.wantObject(e)}
					tc.change(t, e)

					drifts, err := s.drift(ctx)
					if err != nil {
						t.Fatalf("drift check: %v", err)
					}
					if !slices.ContainsFunc(drifts, func(d syncshell.Drift) bool { return d.Kind == want.Kind && d.Object == want.Object }) {
						t.Fatalf("the check found %+v, want a %q drift of %q", drifts, want.Kind, want.Object)
					}
					for _, d := range drifts {
						t.Logf("found: kind=%q object=%q expected=%q found=%q", d.Kind, d.Object, d.Expected, d.Found)
					}

					if _, err := s.sync(ctx, syncInput{full: true, services: ms()}); err != nil {
						t.Fatalf("repairing full sync: %v", err)
					}
					// Chains a full sync found but does not want are
					// flushed, then deleted a second later.
					if err := s.deleteStaleChains(ctx, time.Now().Add(time.Hour), time.Second); err != nil {
						t.Fatalf("deleting stale chains: %v", err)
					}
					if diff := cmp.Diff(snapshot(t, fake), snapshot(t, nft)); diff != "" {
						t.Fatalf("kernel differs from a clean sync after the repair (-clean +kernel):\n%s", diff)
					}
					if out, err := exec.Command("nft", "list", "chain", e.fam, kubeProxyTable, clusterIPsCheckChain).CombinedOutput(); err != nil || !strings.Contains(string(out), "@cluster-ips reject") {
						t.Fatalf("cluster-ips-check after the repair (%v):\n%s", err, out)
					}
					if d, err := s.drift(ctx); err != nil || len(d) != 0 {
						t.Fatalf("check after the repair: drift %v, err %v; want none", d, err)
					}
				})
			})
		}
	}
}

// TestKernelDriftOtherTable: a change to another table moves the kernel's
// generation too. The check then compares our table, finds nothing, and
// records the new generation, so the next check is one request again.
func TestKernelDriftOtherTable(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			inNetns(t, func() {
				ctx := context.Background()
				s, _ := realSyncer(t, tf, nil)
				if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
					t.Fatalf("full sync: %v", err)
				}
				before := s.driftState.gen
				fam := string(familyOf(tf.family))
				nftRun(t, "add", "table", fam, "other")
				nftRun(t, "add", "chain", fam, "other", "input", "{", "type", "filter", "hook", "input", "priority", "0", ";", "}")
				nftRun(t, "add", "rule", fam, "other", "input", "tcp", "dport", "22", "accept")
				nftRun(t, "add", "table", "inet", "another-program")
				if d, err := s.drift(ctx); err != nil || len(d) != 0 {
					t.Fatalf("check after another table changed: drift %v, err %v; want none", d, err)
				}
				if !s.driftState.verified || s.driftState.gen <= before {
					t.Fatalf("generation after the check: %d (verified %v), before the other writer %d; want a newer verified one", s.driftState.gen, s.driftState.verified, before)
				}
			})
		})
	}
}

// TestKernelDriftOwnWrites: the syncer's own writes (an endpoint change
// over netlink, a new Service through nft, a removed Service and the
// deletion of its chains a second later) keep the kernel verified: the
// check after each is one generation request, no comparison, no drift.
func TestKernelDriftOwnWrites(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			inNetns(t, func() {
				ctx := context.Background()
				s, _ := realSyncer(t, tf, nil)
				svcs := slices.Clone(testServices)
				if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
					t.Fatalf("full sync: %v", err)
				}
				extra := tsvc{ns: "ns9", name: "svc9", portName: "p80", clusterIP: "172.30.0.49", port: 80, eps: []tep{{ip: "10.180.0.9", port: 80}}}
				moved := svcs[1]
				moved.eps = []tep{{ip: "10.180.5.5", port: 80}, {ip: "10.180.1.2", port: 80}}
				for _, step := range []struct {
					name string
					do   func() error
				}{
					{"endpoints replaced", func() error {
						_, err := s.sync(ctx, syncInput{services: models(tf.ip, moved)})
						return err
					}},
					{"Service added", func() error {
						_, err := s.sync(ctx, syncInput{services: models(tf.ip, extra)})
						return err
					}},
					{"Service removed", func() error {
						_, err := s.sync(ctx, syncInput{removed: []string{ownerOf(extra)}})
						return err
					}},
					{"stale chains deleted", func() error {
						if !s.staleChainsPending() {
							return fmt.Errorf("no stale chains to delete")
						}
						return s.deleteStaleChains(ctx, time.Now().Add(time.Hour), time.Second)
					}},
				} {
					if err := step.do(); err != nil {
						t.Fatalf("%s: %v", step.name, err)
					}
					before := s.driftState.compares
					if d, err := s.drift(ctx); err != nil || len(d) != 0 {
						t.Fatalf("check after %s: drift %v, err %v; want none", step.name, d, err)
					}
					if s.driftState.compares != before {
						t.Fatalf("check after %s compared the table; our own write should have kept it verified", step.name)
					}
				}
			})
		})
	}
}

// TestKernelDriftDualStack: the two families' syncers share a ledger of
// their commits, so that one family's writes, which move the kernel's one
// generation, do not make the other family compare its table, while
// another program's change still does.
func TestKernelDriftDualStack(t *testing.T) {
	inNetns(t, func() {
		ctx := context.Background()
		s4, _ := realSyncer(t, families[0], nil)
		s6, _ := realSyncer(t, families[1], nil)
		ledger := newGenLedger()
		s4.driftState.ledger, s6.driftState.ledger = ledger, ledger
		for i, s := range []*syncer{s4, s6} {
			if _, err := s.sync(ctx, syncInput{full: true, services: models(families[i].ip, testServices...)}); err != nil {
				t.Fatalf("full sync: %v", err)
			}
		}
		checks := func(step string, wantCompares int) {
			t.Helper()
			for i, s := range []*syncer{s4, s6} {
				before := s.driftState.compares
				if d, err := s.drift(ctx); err != nil || len(d) != 0 {
					t.Fatalf("%s: %s check: drift %v, err %v; want none", step, families[i].family, d, err)
				}
				if got := s.driftState.compares - before; got != wantCompares {
					t.Fatalf("%s: %s check compared the table %d times, want %d", step, families[i].family, got, wantCompares)
				}
			}
		}
		checks("after both full syncs", 0)
		moved := testServices[1]
		moved.eps = []tep{{ip: "10.180.5.5", port: 80}}
		for i, s := range []*syncer{s4, s6, s4} {
			tf := families[i%2]
			if _, err := s.sync(ctx, syncInput{services: models(tf.ip, moved)}); err != nil {
				t.Fatalf("partial sync: %v", err)
			}
		}
		checks("after partial syncs of both families", 0)
		nftRun(t, "add", "table", "inet", "another-program")
		checks("after another program's change", 1)
	})
}

// realProxier builds a Proxier over the real kernel table of the calling
// thread's network namespace (call it inside inNetns), logging to logf.
func realProxier(t *testing.T, tf testFamily, logf func(prefix, args string), onSync func(syncshell.SyncResult)) (*Proxier, knftables.Interface) {
	t.Helper()
	nft, err := knftables.New(familyOf(tf.family), kubeProxyTable, knftables.UseNetlink)
	if err != nil {
		t.Skipf("nftables unusable here: %v", err)
	}
	ctx := klog.NewContext(context.Background(), funcr.New(logf, funcr.Options{}))
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	cfg.NFTables.MasqueradeBit = ptr.To[int32](14)
	cfg.SyncPeriod.Duration = 30 * time.Second
	cfg.MinSyncPeriod.Duration = time.Second
	nw := proxyutiltest.NewFakeNetwork()
	nw.AddInterfaceAddr(&net.Interface{Name: "eth0"}, []net.Addr{&net.IPNet{IP: net.ParseIP(tf.nodeIP), Mask: net.CIDRMask(24, 8*len(net.ParseIP(tf.nodeIP)))}})
	p, err := NewProxierWithOptions(ctx, cfg, tf.family, proxyutil.NewDetectLocalByCIDR(tf.podCIDR), testNodeName,
		net.ParseIP(tf.nodeIP), nil, nil, false,
		WithNFTables(nft), proxieropts.WithNetworkInterfacer(nw), proxieropts.WithConntrack(conntrack.NewFake()),
		proxieropts.WithServiceHealthServer(healthcheck.NewFakeServiceHealthServer()), proxieropts.WithSyncHook(onSync))
	if err != nil {
		t.Fatal(err)
	}
	// As NewProxier sets up for the host's own table.
	w := newNetlinkElements(tf.family)
	t.Cleanup(w.close)
	p.syncer.elements = w
	r := newTableReader(tf.family == v1.IPv6Protocol)
	t.Cleanup(r.close)
	p.syncer.driftState.reader = r
	return p, nft
}

func webService(tf testFamily) (*v1.Service, *discovery.EndpointSlice) {
	ip := tf.ip
	svc := st.NewService("ns1", "web", func(s *v1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.41"), []string{ip("172.30.0.41")}, []v1.IPFamily{tf.family}
		s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}
	})
	es := st.NewSlice("ns1", "web", "web-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
		es.Ports = []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}}
		es.Endpoints = []discovery.Endpoint{st.EndpointWith(ip("10.180.0.1"), testNodeName, true, true, false), st.EndpointWith(ip("10.180.1.1"), "node2", true, true, false)}
	})
	return svc, es
}

// syncLog collects a proxier's log lines and its syncs.
type syncLog struct {
	mu    sync.Mutex
	lines []string
	syncs []syncshell.SyncResult
}

func (l *syncLog) log(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *syncLog) onSync(r syncshell.SyncResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncs = append(l.syncs, r)
}

func (l *syncLog) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

func (l *syncLog) lastFull(t *testing.T) bool {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.syncs) == 0 {
		t.Fatal("no sync ran")
	}
	last := l.syncs[len(l.syncs)-1]
	if last.Err != nil {
		t.Fatalf("sync failed: %v", last.Err)
	}
	return last.Full
}

// check runs what the Shell runs once per syncPeriod: a sync with the drift
// check due.
func check(t *testing.T, p *Proxier) {
	t.Helper()
	p.RequestRulesCheck()
	if err := p.SyncNow(); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// TestKernelProxierDrift: through the Shell, one check after an outside
// change repairs it with a full sync, logged with kind, object, expected and
// found and counted by kind; a change to another table costs no full sync
// and counts nothing.
func TestKernelProxierDrift(t *testing.T) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			inNetns(t, func() {
				var l syncLog
				p, nft := realProxier(t, tf, l.log, l.onSync)
				svc, es := webService(tf)
				startProxier(p, []*v1.Service{svc}, []*discovery.EndpointSlice{es})
				if err := p.SyncNow(); err != nil {
					t.Fatal(err)
				}
				fam := string(familyOf(tf.family))
				family := string(tf.family)
				repairs := func(kind string) float64 {
					v, _ := testutil.GetCounterMetricValue(metrics.SyncProxyRulesDriftRepairsTotal.WithLabelValues(family, kind))
					return v
				}

				// Another program's table: compared, nothing found.
				before := repairs(driftMapElement)
				nftRun(t, "add", "table", fam, "other")
				check(t, p)
				if l.lastFull(t) {
					t.Fatal("a change to another table caused a full sync")
				}

				// Our service-ips element deleted: repaired by the check.
				key := tf.ip("172.30.0.41") + " . tcp . 80"
				nftRun(t, "delete", "element", fam, kubeProxyTable, serviceIPsMap, "{", tf.ip("172.30.0.41"), ".", "tcp", ".", "80", "}")
				check(t, p)
				if !l.lastFull(t) {
					t.Fatal("the check after a deleted map element did not make the sync full")
				}
				elems, err := nft.ListElements(context.Background(), "map", serviceIPsMap)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(elems, func(e *knftables.Element) bool { return joinKey(e.Key) == key }) {
					t.Fatalf("service-ips lacks %s after the repair: %v", key, elems)
				}
				if got := repairs(driftMapElement) - before; got != 1 {
					t.Errorf("map element repairs counted: %v, want 1", got)
				}
				if n := l.count(`"kind"="map element" "object"="service-ips ` + key + `"`); n != 1 {
					t.Errorf("repair log lines naming the element: %d, want 1:\n%s", n, strings.Join(l.lines, "\n"))
				}

				// Nothing changed since: the next check is not full.
				check(t, p)
				if l.lastFull(t) {
					t.Fatal("a check with nothing changed caused a full sync")
				}
			})
		})
	}
}

// TestKernelProxierDriftContested: a writer that deletes the same rule of
// ours before every check. The first contestedRepairs checks repair it;
// then it is logged once as contested, counted in the contested gauge, and
// the following checks (within the backoff) leave it alone instead of
// fighting.
func TestKernelProxierDriftContested(t *testing.T) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	tf := families[0]
	inNetns(t, func() {
		var l syncLog
		p, nft := realProxier(t, tf, l.log, l.onSync)
		svc, es := webService(tf)
		startProxier(p, []*v1.Service{svc}, []*discovery.EndpointSlice{es})
		if err := p.SyncNow(); err != nil {
			t.Fatal(err)
		}
		want := len(ruleHandles(t, nft, servicesChain))
		var full []bool
		var restored []bool
		for range 6 {
			h := ruleHandles(t, nft, servicesChain)
			if len(h) == 0 {
				t.Fatalf("after checks with full syncs %v the chain %s has no rule left to delete", full, servicesChain)
			}
			nftRun(t, "delete", "rule", "ip", kubeProxyTable, servicesChain, "handle", strconv.Itoa(h[len(h)-1]))
			check(t, p)
			full = append(full, l.lastFull(t))
			restored = append(restored, len(ruleHandles(t, nft, servicesChain)) == want)
		}
		wantFull := []bool{true, true, true, false, false, false}
		if !slices.Equal(full, wantFull) || !slices.Equal(restored, wantFull) {
			t.Fatalf("per check: full sync %v, rule restored %v; want both %v", full, restored, wantFull)
		}
		if n := l.count("Another writer keeps undoing"); n != 1 {
			t.Fatalf("contested object logged %d times, want once:\n%s", n, strings.Join(l.lines, "\n"))
		}
		if g, _ := testutil.GetGaugeMetricValue(metrics.SyncProxyRulesDriftContested.WithLabelValues(string(tf.family))); g != 1 {
			t.Fatalf("contested gauge = %v, want 1", g)
		}
	})
}
