//go:build linux

package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/klog/v2/textlogger"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	utiliptables "k8s.io/net-utils/iptables"
	sysctltest "k8s.io/net-utils/sysctl/testing"
)

func TestMain(m *testing.M) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeIPTables)
	os.Exit(m.Run())
}

func restoreFailures(t testing.TB, family v1.IPFamily) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(metrics.IPTablesRestoreFailuresTotal.WithLabelValues(string(family)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func partialFailures(t testing.TB, family v1.IPFamily) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(metrics.IPTablesPartialRestoreFailuresTotal.WithLabelValues(string(family)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// chainsIn lists the chain declarations of a restore input.
func chainsIn(restore string) []string {
	var out []string
	for _, l := range strings.Split(restore, "\n") {
		if strings.HasPrefix(l, ":") {
			out = append(out, strings.Fields(l[1:])[0])
		}
	}
	return out
}

// serviceChainsIn lists the declared per-service chains.
func serviceChainsIn(restore string) []string {
	var out []string
	for _, c := range chainsIn(restore) {
		if isServiceChainName(c) {
			out = append(out, c)
		}
	}
	return out
}

// manyServices makes n ClusterIP services with eps endpoints each.
func manyServices(f fam, n, eps int) ([]*v1.Service, []*discovery.EndpointSlice) {
	var svcs []*v1.Service
	var slcs []*discovery.EndpointSlice
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("svc%d", i)
		svcs = append(svcs, st.NewService("ns", name, func(s *v1.Service) {
			s.Spec.ClusterIP = f.svcIndex(i)
			s.Spec.Ports = []v1.ServicePort{st.ServicePort("p80", 80, v1.ProtocolTCP, 0)}
		}))
		var e []st.EP
		for j := 0; j < eps; j++ {
			e = append(e, st.EP{IP: f.podIndex(i*eps + j), Node: fmt.Sprintf("node%d", j%7)})
		}
		slcs = append(slcs, st.Slice("ns", name, name+"-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("p80", 8080, v1.ProtocolTCP)}, e...))
	}
	return svcs, slcs
}

// svcIndex and podIndex give distinct addresses for large generated clusters.
func (f fam) svcIndex(i int) string {
	if f.family == v1.IPv6Protocol {
		return fmt.Sprintf("fd00:172:31::%x", i+1)
	}
	return fmt.Sprintf("172.31.%d.%d", (i+1)/250, (i+1)%250+1)
}

func (f fam) podIndex(i int) string {
	if f.family == v1.IPv6Protocol {
		return fmt.Sprintf("fd00:10::3:%x", i+1)
	}
	return fmt.Sprintf("10.%d.%d.%d", 100+(i+1)/62500, ((i+1)/250)%250, (i+1)%250+1)
}

func TestPartialSync(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			svcs, slcs := manyServices(f, 5, 3)
			env := newTestEnv(t, f, envConfig{})
			for _, s := range svcs {
				env.p.OnServiceAdd(s)
			}
			for _, s := range slcs {
				env.p.OnEndpointSliceAdd(s)
			}
			env.start(t)
			full := env.restore[len(env.restore)-1]
			if n := len(serviceChainsIn(full)); n != 5*(1+3) {
				t.Fatalf("full sync declared %d service chains, want %d:\n%s", n, 5*4, full)
			}

			// Nothing changed: no service chain is rewritten.
			env.sync(t)
			if got := serviceChainsIn(env.restore[len(env.restore)-1]); len(got) != 0 {
				t.Errorf("idle partial sync rewrote chains %v", got)
			}

			// One endpoint replaced in svc2: only svc2's chains, plus the
			// old endpoint's chain for deletion.
			updateSlice(env.p, slcs, 2, func(s *discovery.EndpointSlice) { s.Endpoints[0].Addresses = []string{f.podIndex(999)} })
			env.sync(t)
			partial := env.restore[len(env.restore)-1]
			got := serviceChainsIn(partial)
			svc2 := newServiceInfoForTest(f, svcs[2])
			oldSEP := string(endpointChainName("ns/svc2:p80", "tcp", f.hp(f.podIndex(6), 8080)))
			newSEP := string(endpointChainName("ns/svc2:p80", "tcp", f.hp(f.podIndex(999), 8080)))
			for _, want := range []string{string(svc2.clusterPolicyChain), oldSEP, newSEP} {
				if !slices.Contains(got, want) {
					t.Errorf("partial sync did not declare %s; declared %v", want, got)
				}
			}
			if len(got) != 1+3+1 {
				t.Errorf("partial sync declared %d service chains, want 5: %v", len(got), got)
			}
			if !strings.Contains(partial, "-X "+oldSEP+"\n") {
				t.Errorf("stale endpoint chain %s not deleted:\n%s", oldSEP, partial)
			}
			// The top-level chains are complete: every service is still
			// reachable, the new endpoint is used, the old one is gone.
			tr := env.tracer(t)
			for i := range svcs {
				outs, err := tr.trace(f.fromPod(f.pod(9), f.svcIndex(i), 80))
				if err != nil {
					t.Fatal(err)
				}
				if len(outs) != 3 {
					t.Errorf("svc%d after partial sync: %v", i, summary(outs))
				}
				for _, o := range outs {
					if i == 2 && o.dnat == f.hp(f.podIndex(6), 8080) {
						t.Errorf("svc2 still reaches removed endpoint")
					}
				}
			}
			if strings.Contains(env.dump(t), oldSEP) {
				t.Errorf("stale chain %s still in the table", oldSEP)
			}

			// Deleting a service deletes all its chains, without iptables-save.
			env.p.OnServiceDelete(svcs[4])
			env.p.OnEndpointSliceDelete(slcs[4])
			env.sync(t)
			del := env.restore[len(env.restore)-1]
			if n := strings.Count(del, "\n-X KUBE-"); n != 4 {
				t.Errorf("service deletion removed %d chains, want 4:\n%s", n, del)
			}
			outs, err := env.tracer(t).trace(f.fromPod(f.pod(9), f.svcIndex(4), 80))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := summary(outs), []string{acc("", false, "100%")}; !slices.Equal(got, want) {
				t.Errorf("deleted service still handled: %q", got)
			}
		})
	}
}

// updateSlice replaces slcs[i] by a modified copy and tells p. Objects
// handed to the proxier are never modified in place, as with informers.
func updateSlice(p *Proxier, slcs []*discovery.EndpointSlice, i int, modify func(*discovery.EndpointSlice)) {
	upd := slcs[i].DeepCopy()
	modify(upd)
	p.OnEndpointSliceUpdate(slcs[i], upd)
	slcs[i] = upd
}

// newServiceInfoForTest computes the chain names of a service's first port.
func newServiceInfoForTest(f fam, svc *v1.Service) *servicePortInfo {
	return &servicePortInfo{
		clusterPolicyChain: svcChainFor(svc.Namespace+"/"+svc.Name+":"+svc.Spec.Ports[0].Name, strings.ToLower(string(svc.Spec.Ports[0].Protocol))),
	}
}

func svcChainFor(name, proto string) utiliptables.Chain {
	return utiliptables.Chain(svcChainPrefix + serviceChainHash(name, proto))
}

func TestRestoreFailureFallsBackToFullSync(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			svcs, slcs := manyServices(f, 3, 2)
			env := newTestEnv(t, f, envConfig{})
			for _, s := range svcs {
				env.p.OnServiceAdd(s)
			}
			for _, s := range slcs {
				env.p.OnEndpointSliceAdd(s)
			}
			env.start(t)
			before := env.dump(t)

			failures, partials := restoreFailures(t, f.family), partialFailures(t, f.family)
			env.ipt.SetRestoreError(errors.New("injected failure"))
			updateSlice(env.p, slcs, 0, func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[:1] })
			if err := env.p.SyncNow(); err == nil {
				t.Fatal("sync succeeded although restore failed")
			}
			if got := restoreFailures(t, f.family); got != failures+1 {
				t.Errorf("restore failures metric = %v, want %v", got, failures+1)
			}
			if got := partialFailures(t, f.family); got != partials+1 {
				t.Errorf("partial restore failures metric = %v, want %v", got, partials+1)
			}
			if after := env.dump(t); after != before {
				t.Errorf("failed restore changed the rules")
			}
			if !env.p.NeedsFullSync() {
				t.Errorf("a failed sync must schedule a full sync")
			}

			env.ipt.SetRestoreError(nil)
			env.sync(t)
			repair := env.restore[len(env.restore)-1]
			// A full sync: all 3 SVC and 5 SEP chains, plus the removed
			// endpoint's chain declared for deletion.
			if n, x := len(serviceChainsIn(repair)), strings.Count(repair, "\n-X "); n != 9 || x != 1 {
				t.Errorf("repair sync declared %d service chains and deleted %d, want 9 and 1:\n%s", n, x, repair)
			}
			outs, err := env.tracer(t).trace(f.fromPod(f.pod(9), f.svcIndex(0), 80))
			if err != nil {
				t.Fatal(err)
			}
			if len(outs) != 1 {
				t.Errorf("svc0 after repair: %v, want its single remaining endpoint", summary(outs))
			}
		})
	}
}

// The canary Monitor's callback forces a full sync that re-creates the
// jumps from builtin chains (which only full syncs ensure).
func TestCanaryForcesFullSync(t *testing.T) {
	f := families[0]
	env := setupScenario(t, f, scenario{services: []*v1.Service{f.stdService(nil)}, slices: []*discovery.EndpointSlice{f.stdSlice()}})
	env.sync(t) // partial, idle
	// Simulate a firewall reload that wiped everything.
	var empty = "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
	if err := env.ipt.RestoreAll([]byte(empty), true, false); err != nil {
		t.Fatal(err)
	}
	outs, err := env.tracer(t).trace(f.fromPod(f.pod(9), f.svc(1), 80))
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || outs[0].dnat != "" {
		t.Fatalf("after wipe, expected no service handling: %v", summary(outs))
	}
	env.p.forceSyncProxyRules()
	outs, err = env.tracer(t).trace(f.fromPod(f.pod(9), f.svc(1), 80))
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 {
		t.Errorf("after canary resync: %v", summary(outs))
	}
}

func TestLargeClusterMode(t *testing.T) {
	f := families[0]
	svcs, slcs := manyServices(f, 101, 10) // 1010 endpoints
	env := newTestEnv(t, f, envConfig{})
	for _, s := range svcs {
		env.p.OnServiceAdd(s)
	}
	for _, s := range slcs {
		env.p.OnEndpointSliceAdd(s)
	}
	env.start(t)
	if !env.p.gen.large {
		t.Fatal("1010 endpoints should select large cluster mode")
	}
	data := env.restore[len(env.restore)-1]
	sepComment := regexp.MustCompile(`(?m)^-A KUBE-SEP-\S+ -m comment`)
	if sepComment.MatchString(data) {
		t.Errorf("large cluster mode still writes endpoint comments")
	}
	// Stale chains are deleted at most once per syncPeriod, as upstream;
	// a queued chain that comes back into use is never deleted.
	sepOf := func(i, j int) string {
		return string(endpointChainName(fmt.Sprintf("ns/svc%d:p80", i), "tcp", f.hp(f.podIndex(i*10+j), 8080)))
	}
	gone := sepOf(5, 0)
	saved := slcs[5].Endpoints[0]
	updateSlice(env.p, slcs, 5, func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[1:] })
	env.sync(t)
	if strings.Contains(env.restore[len(env.restore)-1], "-X "+gone) {
		t.Errorf("large cluster mode deleted %s right away", gone)
	}
	updateSlice(env.p, slcs, 5, func(s *discovery.EndpointSlice) { s.Endpoints = append(s.Endpoints, saved) })
	updateSlice(env.p, slcs, 6, func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[1:] })
	env.p.view.lastStaleCleanup = time.Now().Add(-time.Hour)
	env.sync(t)
	last := env.restore[len(env.restore)-1]
	if strings.Contains(last, "-X "+gone) {
		t.Errorf("deleted %s although it is in use again", gone)
	}
	if !strings.Contains(last, "-X "+sepOf(6, 0)) {
		t.Errorf("queued stale chain %s not deleted once the period passed:\n%s", sepOf(6, 0), last)
	}
	if outs, err := env.tracer(t).trace(f.fromPod(f.pod(9), f.svcIndex(5), 80)); err != nil || len(outs) != 10 {
		t.Errorf("svc5 after its endpoint returned: %v %v", summary(outs), err)
	}

	// Shrinking below the threshold brings comments back on every chain.
	env.p.OnServiceDelete(svcs[0])
	env.p.OnEndpointSliceDelete(slcs[0])
	env.p.OnServiceDelete(svcs[1])
	env.p.OnEndpointSliceDelete(slcs[1])
	env.sync(t)
	if env.p.gen.large {
		t.Fatal("990 endpoints should leave large cluster mode")
	}
	data = env.restore[len(env.restore)-1]
	if n := len(sepComment.FindAllString(data, -1)); n != (99*10-1)*2 { // svc6 lost one endpoint
		t.Errorf("after leaving large cluster mode %d commented SEP rules, want %d", n, (99*10-1)*2)
	}
	outs, err := env.tracer(t).trace(f.fromPod(f.pod(9), f.svcIndex(50), 80))
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 10 {
		t.Errorf("svc50: %d outcomes, want 10", len(outs))
	}
}

func TestHealthCheckServerSync(t *testing.T) {
	f := families[0]
	svc := f.stdService(nodePortLB(f, v1.ServiceExternalTrafficPolicyLocal, 30000))
	env := setupScenario(t, f, scenario{services: []*v1.Service{svc}, slices: []*discovery.EndpointSlice{f.stdSlice()}})
	if got := env.hc.services["ns1/svc1"]; got != 30000 {
		t.Errorf("health check port for ns1/svc1 = %d, want 30000 (%v)", got, env.hc.services)
	}
	if got := env.hc.endpoints["ns1/svc1"]; got != 1 {
		t.Errorf("local endpoints for ns1/svc1 = %d, want 1 (%v)", got, env.hc.endpoints)
	}

	// The incrementally kept counts must always equal the brain's
	// from-scratch answer.
	oracle := func(stage string) {
		t.Helper()
		// Only Services with a health check node port are served.
		want := map[string]int{}
		services, endpoints := env.p.Snapshot()
		hc := services.HealthCheckNodePorts()
		for k, v := range endpoints.LocalReadyEndpoints() {
			if _, ok := hc[k]; ok {
				want[k.String()] = v
			}
		}
		if !maps.Equal(env.hc.endpoints, want) {
			t.Errorf("%s: health server endpoints %v, brain says %v", stage, env.hc.endpoints, want)
		}
	}
	oracle("initial")
	two := st.NewService("ns2", "two", func(s *v1.Service) {
		s.Spec.ClusterIP = f.svc(7)
		s.Spec.Ports = []v1.ServicePort{st.ServicePort("a", 80, v1.ProtocolTCP, 3101), st.ServicePort("b", 81, v1.ProtocolTCP, 3102)}
		// Only Services with a health check node port are served, so
		// this one has one too.
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 30001
	})
	env.p.OnServiceAdd(two)
	twoSlice := st.Slice("ns2", "two", "two-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("a", 80, v1.ProtocolTCP), st.SlicePort("b", 81, v1.ProtocolTCP)},
		st.EP{IP: f.pod(3), Node: testNodeName}, st.EP{IP: f.pod(4), Node: testNodeName}, st.EP{IP: f.pod(5), Node: testNodeName, Terminating: true})
	env.p.OnEndpointSliceAdd(twoSlice)
	env.sync(t)
	oracle("second service, two ports")
	if env.hc.endpoints["ns2/two"] != 2 {
		t.Errorf("ns2/two: %d local ready endpoints, want 2 (IPs counted once across ports)", env.hc.endpoints["ns2/two"])
	}
	slcs := []*discovery.EndpointSlice{f.stdSlice()}
	updateSlice(env.p, slcs, 0, func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[1:] })
	env.sync(t)
	oracle("local endpoint of svc1 removed")
	env.p.OnEndpointSliceDelete(twoSlice)
	env.p.OnServiceDelete(two)
	env.sync(t)
	oracle("second service deleted")
}

func TestRuleCountMetrics(t *testing.T) {
	f := families[0]
	env := setupScenario(t, f, scenario{services: []*v1.Service{f.stdService(nil)}, slices: []*discovery.EndpointSlice{f.stdSlice()}})
	natTotal, _ := testutil.GetGaugeMetricValue(metrics.IPTablesRulesTotal.WithLabelValues("nat", string(f.family)))
	natLast, _ := testutil.GetGaugeMetricValue(metrics.IPTablesRulesLastSync.WithLabelValues("nat", string(f.family)))
	data := env.restore[len(env.restore)-1]
	natPart := data[strings.Index(data, "*nat"):]
	want := float64(strings.Count(natPart, "\n-A "))
	if natTotal != want || natLast != want {
		t.Errorf("nat rules total=%v last=%v, want %v", natTotal, natLast, want)
	}
	env.sync(t) // idle partial: total unchanged, last sync smaller
	natTotal2, _ := testutil.GetGaugeMetricValue(metrics.IPTablesRulesTotal.WithLabelValues("nat", string(f.family)))
	natLast2, _ := testutil.GetGaugeMetricValue(metrics.IPTablesRulesLastSync.WithLabelValues("nat", string(f.family)))
	if natTotal2 != want {
		t.Errorf("after partial sync nat total=%v, want %v", natTotal2, want)
	}
	if natLast2 >= want {
		t.Errorf("after idle partial sync nat last=%v, want < %v", natLast2, want)
	}
}

// Bad input is skipped with a log naming it; the rest is programmed.
func TestBadInputSkipped(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			good := f.stdService(nil)
			badIP := st.NewService("ns1", "badip", func(s *v1.Service) {
				s.Spec.ClusterIP = "not-an-ip"
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("p", 80, v1.ProtocolTCP, 0)}
			})
			portZero := st.NewService("ns1", "port0", func(s *v1.Service) {
				s.Spec.ClusterIP = f.svc(3)
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("p", 0, v1.ProtocolTCP, 0)}
			})
			badName := st.NewService("ns1", `evil" -j ACCEPT`, func(s *v1.Service) {
				s.Spec.ClusterIP = f.svc(4)
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("p", 80, v1.ProtocolTCP, 0)}
			})
			garbage := f.stdSlice(st.EP{IP: "garbage", Node: testNodeName}, st.EP{IP: f.rpod(1), Node: "node2"}, st.EP{IP: "10.0.0.0.0", Node: "node2"})
			env := newTestEnv(t, f, envConfig{})
			// The brain may reject some of this before the proxier sees it;
			// either way a log line must name it.
			var logs syncBuffer
			logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&logs)))
			klog.SetLogger(logger)
			defer klog.ClearLogger()
			env.p.setLogger(logger)
			for _, s := range []*v1.Service{good, badIP, portZero, badName} {
				env.p.OnServiceAdd(s)
			}
			env.p.OnEndpointSliceAdd(garbage)
			env.start(t)
			outs, err := env.tracer(t).trace(f.fromPod(f.pod(9), f.svc(1), 80))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := summary(outs), []string{acc(f.hp(f.rpod(1), 8080), false, "100%")}; !slices.Equal(got, want) {
				t.Errorf("good service: got %q, want %q", got, want)
			}
			data := env.restore[len(env.restore)-1]
			if strings.Contains(data, "evil") || strings.Contains(data, "garbage") || strings.Contains(data, "not-an-ip") {
				t.Errorf("bad input reached the ruleset:\n%s", data)
			}
			named := []string{"port0", "evil", "garbage"}
			if f.family == v1.IPv4Protocol {
				// An unparseable cluster IP is of no family; the IPv4
				// side reports it (as upstream's trackers do).
				named = append(named, "badip", "10.0.0.0.0")
			}
			for _, name := range named {
				if !strings.Contains(logs.String(), name) {
					t.Errorf("no log names %q; logs:\n%s", name, logs.String())
				}
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Dry run prints a complete restore input and touches nothing.
func TestDryRun(t *testing.T) {
	f := families[0]
	var out bytes.Buffer
	sc := sysctltest.NewFake()
	_, ctx := ktesting.NewTestContext(t)
	p, err := NewProxierWithOptions(ctx, newTestConfig(envConfig{}), f.family, nil, sc,
		proxyutil.NewDetectLocalByCIDR(f.clusterCIDR), testNodeName, nil, nil, nil, false, proxieropts.WithDryRun(&out))
	if err != nil {
		t.Fatal(err)
	}
	p.OnServiceAdd(f.stdService(nil))
	p.OnEndpointSliceAdd(f.stdSlice())
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	text := out.String()
	for _, want := range []string{"*filter\n", "*nat\n", "COMMIT\n", "# ensure: -t nat -I PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES", "-A KUBE-SERVICES"} {
		if !strings.Contains(text, want) {
			t.Errorf("dry-run output lacks %q:\n%s", want, text)
		}
	}
	rs, err := parseRuleset(text)
	if err != nil {
		t.Fatalf("dry-run output does not parse: %v", err)
	}
	if len(rs["nat"]["KUBE-SERVICES"]) == 0 {
		t.Errorf("dry-run KUBE-SERVICES empty")
	}
	if w := sc.Writes; len(w) != 0 {
		t.Errorf("dry run wrote sysctls: %v", w)
	}
}

// The sync that switches to (or from) large cluster mode rewrites every
// chain, so it is a full sync in every respect: it also restores the jumps
// from builtin chains, as the dry run has always printed.
func TestLargeClusterSwitchEnsuresJumpRules(t *testing.T) {
	f := families[0]
	svcs, slcs := manyServices(f, 100, largeClusterEndpointsThreshold/100)
	env := newTestEnv(t, f, envConfig{})
	for _, s := range svcs {
		env.p.OnServiceAdd(s)
	}
	for _, s := range slcs {
		env.p.OnEndpointSliceAdd(s)
	}
	env.start(t)
	prerouting := jumpRules[10]
	if prerouting.Src != utiliptables.ChainPrerouting {
		t.Fatalf("jumpRules[10] is %v, not the nat PREROUTING jump", prerouting)
	}
	if err := env.ipt.DeleteRule(prerouting.Table, prerouting.Src, prerouting.Args()...); err != nil {
		t.Fatal(err)
	}
	updateSlice(env.p, slcs, 0, func(s *discovery.EndpointSlice) {
		s.Endpoints = append(s.Endpoints, s.Endpoints[0])
		s.Endpoints[len(s.Endpoints)-1].Addresses = []string{f.podIndex(900000)}
	})
	env.sync(t)
	if !env.p.gen.large {
		t.Fatal("not in large cluster mode after crossing the threshold")
	}
	if !strings.Contains(env.dump(t), "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES") {
		t.Errorf("the full sync into large cluster mode left the PREROUTING jump missing")
	}
}

// The generator renders each port from its node-local model: endpoints in
// the brain's "ip:port" text order (not the model's address order), SEP
// names from the same hash as before, a full sync of unchanged ports
// converts nothing again, and a changed port keeps the strings of the
// endpoints that stayed.
func TestPortModel(t *testing.T) {
	name := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "svc"}, Port: "p80", Protocol: v1.ProtocolTCP}
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			svc := st.NewService("ns", "svc", func(s *v1.Service) {
				s.Spec.ClusterIP = f.svc(1)
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("p80", 80, v1.ProtocolTCP, 0)}
			})
			ports := []discovery.EndpointPort{st.SlicePort("p80", 8080, v1.ProtocolTCP)}
			// Pods 9 and 10 sort differently as text and as addresses.
			slcs := []*discovery.EndpointSlice{st.Slice("ns", "svc", "svc-1", st.AddressTypeOf(f.family), ports,
				st.EP{IP: f.pod(9), Node: testNodeName}, st.EP{IP: f.pod(10), Node: "node2"}, st.EP{IP: f.pod(11), Node: "node2"})}
			env := newTestEnv(t, f, envConfig{})
			env.p.OnServiceAdd(svc)
			env.p.OnEndpointSliceAdd(slcs[0])
			env.start(t)

			model := func() *portModel {
				t.Helper()
				r := env.p.view.ports[name]
				if r == nil || r.model == nil || r.model.info == nil {
					t.Fatalf("no model for %s", name)
				}
				return r.model
			}
			endpoints := func(m *portModel) []string {
				var out []string
				for _, e := range m.reachable {
					out = append(out, e.endpoint)
				}
				return out
			}
			m := model()
			want := []string{f.hp(f.pod(10), 8080), f.hp(f.pod(11), 8080), f.hp(f.pod(9), 8080)}
			if got := endpoints(m); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("endpoints %v, want %v (the brain's text order)", got, want)
			}
			for _, e := range m.reachable {
				if wantChain := endpointChainName("ns/svc:p80", "tcp", e.endpoint); e.chain != wantChain {
					t.Errorf("endpoint %s: chain %s, want %s", e.endpoint, e.chain, wantChain)
				}
			}
			if len(m.cluster) != 3 || len(m.local) != 0 {
				t.Errorf("cluster %d, local %d endpoints; want 3, 0", len(m.cluster), len(m.local))
			}

			first := &m.reachable[0]
			env.p.RequestFullSync()
			env.sync(t)
			if m := model(); &m.reachable[0] != first {
				t.Errorf("a full sync with nothing changed converted the port again")
			}

			kept := unsafe.StringData(string(m.reachable[2].chain))
			updateSlice(env.p, slcs, 0, func(s *discovery.EndpointSlice) { s.Endpoints[1].Addresses = []string{f.pod(12)} })
			env.sync(t)
			m = model()
			want = []string{f.hp(f.pod(11), 8080), f.hp(f.pod(12), 8080), f.hp(f.pod(9), 8080)}
			if got := endpoints(m); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after the change: endpoints %v, want %v", got, want)
			}
			if unsafe.StringData(string(m.reachable[2].chain)) != kept {
				t.Errorf("the chain name of an endpoint that stayed was computed again")
			}
			if wantChain := endpointChainName("ns/svc:p80", "tcp", want[1]); m.reachable[1].chain != wantChain {
				t.Errorf("new endpoint: chain %s, want %s", m.reachable[1].chain, wantChain)
			}
		})
	}
}
