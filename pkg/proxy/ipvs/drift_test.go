//go:build linux

package ipvs

import (
	"bytes"
	"net"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-base/metrics/testutil"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	utilipset "k8s.io/net-utils/ipset"
	utiliptables "k8s.io/net-utils/iptables"
	iptablestest "k8s.io/net-utils/iptables/testing"
	utilipvs "k8s.io/net-utils/ipvs"
)

var allDriftKinds = []string{driftInterface, driftAddress, driftSet, driftSetElement, driftVirtualServer, driftRealServer, driftChain, driftRule, driftJump}

func driftRepairs(t testing.TB, family v1.IPFamily, kind string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(metrics.SyncProxyRulesDriftRepairsTotal.WithLabelValues(string(family), kind))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDriftRepair makes each outside change of issue 35 (and a few more)
// to the fakes and expects the periodic check to report it, by kind, and
// its full sync to put back exactly what was programmed; changes to what is
// not ours must be left alone.
func TestDriftRepair(t *testing.T) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeIPVS)
	for _, f := range fams {
		web := &utilipvs.VirtualServer{Address: net.ParseIP(f.svc(1)), Port: 80, Protocol: "TCP"}
		setName := func(s string) string {
			if f.ipv6 {
				return ipv6SetName(s)
			}
			return s
		}
		for _, tc := range []struct {
			name    string
			disturb func(t *testing.T, env *fakeEnv)
			// kinds the check must report; none: not ours, left alone.
			kinds []string
			// fingerprinted: only a check that saw the chain before notices.
			fingerprinted bool
		}{
			{name: "real server deleted (ipvsadm -d)", kinds: []string{driftRealServer}, disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.ipvs.DeleteRealServer(web, &utilipvs.RealServer{Address: net.ParseIP(f.rpod(1)), Port: 8080}))
			}},
			{name: "real server weight changed", kinds: []string{driftRealServer}, disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.ipvs.UpdateRealServer(web, &utilipvs.RealServer{Address: net.ParseIP(f.rpod(1)), Port: 8080, Weight: 0}))
			}},
			{name: "real server added", kinds: []string{driftRealServer}, disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.ipvs.AddRealServer(web, &utilipvs.RealServer{Address: net.ParseIP(f.rpod(7)), Port: 8080, Weight: 1}))
			}},
			{name: "virtual server deleted", kinds: []string{driftVirtualServer}, disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.ipvs.DeleteVirtualServer(web))
			}},
			{name: "virtual server scheduler changed", kinds: []string{driftVirtualServer}, disturb: func(t *testing.T, env *fakeEnv) {
				vs := *web
				vs.Scheduler = "wlc"
				must(t, env.ipvs.UpdateVirtualServer(&vs))
			}},
			{name: "virtual servers flushed", kinds: []string{driftVirtualServer}, disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.ipvs.Flush())
			}},
			{name: "entry deleted from KUBE-CLUSTER-IP", kinds: []string{driftSetElement}, disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.ipset.DelEntry(f.svc(1)+",tcp:80", setName("KUBE-CLUSTER-IP")))
			}},
			{name: "entry added to KUBE-NODE-PORT-TCP", kinds: []string{driftSetElement}, disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.ipset.AddEntry("31999", env.ipset.Sets[setName("KUBE-NODE-PORT-TCP")], false))
			}},
			{name: "set destroyed", kinds: []string{driftSet}, disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.ipset.DestroySet(setName("KUBE-LOOP-BACK")))
			}},
			{name: "Service address unbound from kube-ipvs0", kinds: []string{driftAddress}, disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.netlink.UnbindAddress(f.svc(1), defaultDummyDevice))
			}},
			{name: "foreign address bound to kube-ipvs0", kinds: []string{driftAddress}, disturb: func(t *testing.T, env *fakeEnv) {
				_, err := env.netlink.EnsureAddressBind(f.svc(9), defaultDummyDevice)
				must(t, err)
			}},
			{name: "kube-ipvs0 deleted", kinds: []string{driftInterface}, disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.netlink.DeleteDummyDevice(defaultDummyDevice))
			}},
			{name: "KUBE-SERVICES flushed, chain kept", kinds: []string{driftRule}, disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.ipt.FlushChain(utiliptables.TableNAT, kubeServicesChain))
			}},
			{name: "KUBE-IPVS-FILTER rule replaced", kinds: []string{driftRule}, fingerprinted: true, disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.ipt.RestoreAll([]byte("*filter\n-D KUBE-IPVS-FILTER 1\n-A KUBE-IPVS-FILTER -j RETURN\nCOMMIT\n"), utiliptables.NoFlushTables, utiliptables.NoRestoreCounters))
			}},
			{name: "jump from PREROUTING deleted", kinds: []string{driftJump}, disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.ipt.DeleteRule(utiliptables.TableNAT, utiliptables.ChainPrerouting, "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"))
			}},
			{name: "other software's chain, set and virtual server", disturb: func(t *testing.T, env *fakeEnv) {
				must(t, env.ipt.RestoreAll([]byte("*nat\n:OTHER - [0:0]\n-A OTHER -j RETURN\n-I PREROUTING 1 -j OTHER\nCOMMIT\n"), utiliptables.NoFlushTables, utiliptables.NoRestoreCounters))
				must(t, env.ipset.CreateSet(&utilipset.IPSet{Name: "OTHER", SetType: utilipset.HashIP, HashFamily: map[bool]string{false: utilipset.ProtocolFamilyIPV4, true: utilipset.ProtocolFamilyIPV6}[f.ipv6]}, false))
				must(t, env.ipvs.AddVirtualServer(&utilipvs.VirtualServer{Address: net.ParseIP(f.svc(200)), Port: 80, Protocol: "TCP", Scheduler: "rr"}))
			}},
		} {
			t.Run(string(f.family)+"/"+tc.name, func(t *testing.T) {
				opts := fakeProxierOptions{}
				if len(tc.kinds) == 0 {
					opts.excludeCIDRs = []string{f.svc(200) + "/" + map[bool]string{false: "32", true: "128"}[f.ipv6]}
				}
				p, env := newFakeProxier(t, f.family, []string{f.node}, opts)
				p.OnServiceAdd(webService(f, nil))
				p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}, st.EP{IP: f.rpod(2)}))
				syncAll(t, p)
				b := (*rulesBackend)(p)
				for i := 0; i < 2; i++ { // the second with fingerprints
					if drifts, err := b.Drift(env.ctx); err != nil || len(drifts) != 0 {
						t.Fatalf("check %d after a clean sync: %+v, %v", i, drifts, err)
					}
				}
				if !tc.fingerprinted {
					clear(p.st.fingerprints)
				}
				want := env.dump(t)
				repairs := map[string]float64{}
				for _, k := range allDriftKinds {
					repairs[k] = driftRepairs(t, f.family, k)
				}

				tc.disturb(t, env)
				changed := env.dump(t)
				if changed == want {
					t.Fatal("the outside change changed nothing")
				}
				drifts, err := b.Drift(env.ctx)
				if err != nil {
					t.Fatal(err)
				}
				var kinds []string
				for _, d := range drifts {
					kinds = append(kinds, d.Kind)
				}
				slices.Sort(kinds)
				kinds = slices.Compact(kinds)
				if !slices.Equal(kinds, tc.kinds) {
					t.Errorf("drift kinds %v, want %v; drifts %+v", kinds, tc.kinds, drifts)
				}

				p.RequestRulesCheck() // as the Shell's timer does every syncPeriod
				if err := p.SyncNow(); err != nil {
					t.Fatal(err)
				}
				got := env.dump(t)
				if len(tc.kinds) == 0 {
					if diff := cmp.Diff(changed, got); diff != "" {
						t.Errorf("a change that is not ours was undone (-changed +got):\n%s", diff)
					}
				} else if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("not repaired within one check (-want +got):\n%s", diff)
				}
				for _, k := range allDriftKinds {
					n := driftRepairs(t, f.family, k) - repairs[k]
					if slices.Contains(tc.kinds, k) != (n > 0) {
						t.Errorf("repairs of kind %q counted: %v, want them: %v", k, n, slices.Contains(tc.kinds, k))
					}
				}
				if drifts, err := b.Drift(env.ctx); err != nil || len(drifts) != 0 {
					t.Errorf("check after the repair: %+v, %v; want nothing", drifts, err)
				}
			})
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// countingIPSet counts listings, to show the check lists every set at once.
type countingIPSet struct {
	utilipset.Interface
	utilipset.Restorer
	lister utilipset.AllLister
	calls  map[string]int
}

func (c *countingIPSet) ListEntries(set string) ([]string, error) {
	c.calls["ListEntries"]++
	return c.Interface.ListEntries(set)
}

func (c *countingIPSet) ListAllEntries() (map[string][]string, error) {
	c.calls["ListAllEntries"]++
	return c.lister.ListAllEntries()
}

// TestDriftCheckReadsOnce: with nothing changed, the check makes one read
// of each kind (plus the real servers of each virtual server) and writes
// nothing.
func TestDriftCheckReadsOnce(t *testing.T) {
	f := fams[0]
	p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
	p.OnServiceAdd(lbService(f, nil))
	p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}))
	syncAll(t, p)
	cs := &countingIPSet{Interface: env.ipset, Restorer: env.ipset, lister: env.ipset, calls: map[string]int{}}
	ci := &countingIPVS{Interface: env.ipvs, calls: map[string]int{}}
	p.ipset, p.ipvs = cs, ci
	vss, _ := env.ipvs.GetVirtualServers()
	drifts, err := (*rulesBackend)(p).Drift(env.ctx)
	if err != nil || len(drifts) != 0 {
		t.Fatalf("Drift: %+v, %v", drifts, err)
	}
	if cs.calls["ListAllEntries"] != 1 || cs.calls["ListEntries"] != 0 {
		t.Errorf("ipset listings %v, want one ListAllEntries", cs.calls)
	}
	if ci.calls["GetVirtualServers"] != 1 || ci.calls["GetRealServers"] != len(vss) || len(ci.calls) != 2 {
		t.Errorf("IPVS calls %v, want one GetVirtualServers and %d GetRealServers", ci.calls, len(vss))
	}
}

func TestCanonicalEntry(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"198.18.0.1,tcp:80", "198.18.0.1,tcp:80"},
		{"198.18.0.1,tcp:80,203.0.113.5/32", "198.18.0.1,tcp:80,203.0.113.5"},
		{"198.18.0.1,tcp:80,203.0.113.0/24", "198.18.0.1,tcp:80,203.0.113.0/24"},
		{"FD00::1,TCP:80,2001:DB8::/128", "fd00::1,tcp:80,2001:db8::"},
		{"30080", "30080"},
	} {
		if got := canonicalEntry(tc.in); got != tc.want {
			t.Errorf("canonicalEntry(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestDriftNotReported: what differs from the state without being drift.
func TestDriftNotReported(t *testing.T) {
	f := fams[0]
	for _, tc := range []struct {
		name    string
		disturb func(t *testing.T, p *Proxier, env *fakeEnv)
	}{
		// ipset lists a host network without its /32.
		{"set entry spelled otherwise by ipset", func(t *testing.T, p *Proxier, env *fakeEnv) {
			set := "KUBE-LOAD-BALANCER-SOURCE-CIDR"
			ours := f.lb + ",tcp:80," + f.external + "/32"
			if !env.ipset.Entries[set].Has(ours) {
				t.Fatalf("%s lacks %s: %v", set, ours, sets.List(env.ipset.Entries[set]))
			}
			must(t, env.ipset.DelEntry(ours, set))
			must(t, env.ipset.AddEntry(f.lb+",tcp:80,"+f.external, env.ipset.Sets[set], false))
		}},
		// The graceful termination manager deletes a draining real server
		// when its connections are gone, as it was asked to.
		{"draining real server deleted by the termination manager", func(t *testing.T, p *Proxier, env *fakeEnv) {
			setConns(t, env, f.svc(1), 80, "TCP", f.hp(f.rpod(2), 8080), 1)
			p.OnEndpointSliceUpdate(webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}, st.EP{IP: f.rpod(2)}), webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}))
			must(t, p.SyncNow())
			vs := &utilipvs.VirtualServer{Address: net.ParseIP(f.svc(1)), Port: 80, Protocol: "TCP"}
			if w := weights(t, env, f.svc(1), 80, "TCP"); w[f.hp(f.rpod(2), 8080)] != 0 {
				t.Fatalf("weights %v: want %s draining", w, f.hp(f.rpod(2), 8080))
			}
			must(t, env.ipvs.DeleteRealServer(vs, &utilipvs.RealServer{Address: net.ParseIP(f.rpod(2)), Port: 8080}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
			p.OnServiceAdd(lbService(f, func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{f.external + "/32"} }))
			p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}, st.EP{IP: f.rpod(2)}))
			syncAll(t, p)
			tc.disturb(t, p, env)
			for i := 0; i < 2; i++ {
				if drifts, err := (*rulesBackend)(p).Drift(env.ctx); err != nil || len(drifts) != 0 {
					t.Errorf("check %d: %+v, %v; want nothing", i, drifts, err)
				}
			}
		})
	}
}

// generationIPT is the fake iptables with an nf_tables generation that
// every restore bumps; saves are counted.
type generationIPT struct {
	*iptablestest.FakeIPTables
	gen, saves int
}

func (g *generationIPT) Generation() (uint32, bool, error) { return uint32(g.gen), true, nil }

func (g *generationIPT) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	g.gen++
	return g.FakeIPTables.RestoreAll(data, flush, counters)
}

func (g *generationIPT) SaveInto(table utiliptables.Table, buf *bytes.Buffer) error {
	g.saves++
	return g.FakeIPTables.SaveInto(table, buf)
}

// TestDriftGeneration: on iptables-nft the rules are read only when the
// nf_tables generation moved since the last check that found them as
// written, and a change from outside is still seen.
func TestDriftGeneration(t *testing.T) {
	f := fams[0]
	p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
	ipt := &generationIPT{FakeIPTables: env.ipt}
	p.ipt = ipt
	p.OnServiceAdd(webService(f, nil))
	p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}))
	syncAll(t, p)
	b := (*rulesBackend)(p)
	for i, want := range []int{2, 0, 0} {
		saves := ipt.saves
		if d, err := b.Drift(env.ctx); err != nil || len(d) != 0 {
			t.Fatalf("check %d: %+v, %v", i, d, err)
		}
		if got := ipt.saves - saves; got != want {
			t.Errorf("check %d read %d tables, want %d", i, got, want)
		}
	}
	must(t, ipt.RestoreAll([]byte("*nat\n-F KUBE-SERVICES\nCOMMIT\n"), utiliptables.NoFlushTables, utiliptables.NoRestoreCounters))
	if d, err := b.Drift(env.ctx); err != nil || len(d) != 1 || d[0].Object != "nat/KUBE-SERVICES" {
		t.Errorf("after KUBE-SERVICES was flushed: %+v, %v", d, err)
	}
}
