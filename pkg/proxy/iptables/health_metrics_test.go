//go:build linux

package iptables

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
)

// The masquerade mark is written in four places (set, test-and-return,
// clear, forward-accept); they must all use the configured bit, and
// --random-fully must only be asked of an iptables that has it, or every
// restore would fail.
func TestMasqueradeMarkAndRandomFully(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cfg         envConfig
		mark        string
		randomFully bool
	}{
		{"default bit 14", envConfig{}, "0x00004000", true},
		{"bit 0 without random-fully", envConfig{masqueradeBit: ptr.To[int32](0), noRandomFully: true}, "0x00000001", false},
		{"bit 31", envConfig{masqueradeBit: ptr.To[int32](31)}, "0x80000000", true},
	} {
		for _, f := range families {
			t.Run(tc.name+"/"+string(f.family), func(t *testing.T) {
				env := setupScenario(t, f, scenario{cfg: tc.cfg, services: []*v1.Service{f.stdService(nil)}, slices: []*discovery.EndpointSlice{f.stdSlice()}})
				data := env.restore[len(env.restore)-1]
				masq := `-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE`
				if tc.randomFully {
					masq += " --random-fully"
				}
				for _, want := range []string{
					"-A KUBE-MARK-MASQ -j MARK --or-mark " + tc.mark,
					"-A KUBE-POSTROUTING -m mark ! --mark " + tc.mark + "/" + tc.mark + " -j RETURN",
					"-A KUBE-POSTROUTING -j MARK --xor-mark " + tc.mark,
					masq,
					`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark ` + tc.mark + "/" + tc.mark + " -j ACCEPT",
				} {
					if !strings.Contains(data, "\n"+want+"\n") {
						t.Errorf("restore lacks %q:\n%s", want, data)
					}
				}
				if !tc.randomFully && strings.Contains(data, "--random-fully") {
					t.Errorf("--random-fully written although iptables lacks it")
				}
			})
		}
	}
}

// Outside large-cluster mode a partial sync becomes a full one once
// FullSyncPeriod has passed since the last full sync, repairing anything
// changed behind the proxier's back; large clusters never do this.
func TestPeriodicFullSync(t *testing.T) {
	f := families[0]
	for _, tc := range []struct {
		name      string
		n, eps    int
		wantFull  bool
		wantLarge bool
	}{
		{"small cluster", 3, 2, true, false},
		{"large cluster", 101, 10, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svcs, slcs := manyServices(f, tc.n, tc.eps)
			env := newTestEnv(t, f, envConfig{})
			for _, s := range svcs {
				env.p.OnServiceAdd(s)
			}
			for _, s := range slcs {
				env.p.OnEndpointSliceAdd(s)
			}
			env.start(t)
			if env.p.gen.large != tc.wantLarge {
				t.Fatalf("largeClusterMode = %v, want %v", env.p.gen.large, tc.wantLarge)
			}
			allChains := tc.n * (1 + tc.eps)

			env.sync(t)
			if got := len(serviceChainsIn(env.restore[len(env.restore)-1])); got != 0 {
				t.Fatalf("idle sync right after a full one rewrote %d service chains", got)
			}

			// Whether FullSyncPeriod makes a sync full is the shell's
			// decision (syncshell's TestPeriodicFullSync); the backend tells
			// it that large clusters skip it, as upstream.
			env.p.RequestFullSync()
			env.sync(t)
			if got := len(serviceChainsIn(env.restore[len(env.restore)-1])); got != allChains {
				t.Errorf("full sync declared %d service chains, want all %d", got, allChains)
			}
			services, endpoints := env.p.Snapshot()
			out, err := (*rulesBackend)(env.p).Sync(context.Background(), syncshell.NewUpdate(false, services, endpoints, nil, testNodeName, nil))
			if err != nil {
				t.Fatal(err)
			}
			if out.NoPeriodicFullSync == tc.wantFull {
				t.Errorf("NoPeriodicFullSync = %v, want %v", out.NoPeriodicFullSync, !tc.wantFull)
			}
		})
	}
}

// The proxy health server learns of every queued change (Sync) and of every
// successful sync; a failing sync leaves the proxier unhealthy.
func TestProxyHealthServerUpdates(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			// A zero timeout makes any queued, unsynced change unhealthy at
			// once, so the test needs no clock.
			hs := healthcheck.NewProxyHealthServer("127.0.0.1:0", 0, nil)
			env := newTestEnv(t, f, envConfig{healthz: hs})
			slcs := []*discovery.EndpointSlice{f.stdSlice()}
			env.p.OnServiceAdd(f.stdService(nil))
			env.p.OnEndpointSliceAdd(slcs[0])
			if _, ok := hs.Health().Status[f.family]; ok {
				t.Fatalf("health reported for %s before the first sync", f.family)
			}

			env.start(t)
			h := hs.Health()
			st, ok := h.Status[f.family]
			if !ok || !st.Healthy || st.LastUpdated.IsZero() {
				t.Fatalf("after the first sync: %+v, want healthy with a LastUpdated", h)
			}
			first := st.LastUpdated

			queuedBefore, _ := testutil.GetGaugeMetricValue(metrics.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(string(f.family)))
			updateSlice(env.p, slcs, 0, func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[:1] })
			if hs.Health().Status[f.family].Healthy {
				t.Errorf("a queued change did not reach the health server")
			}
			if queued, _ := testutil.GetGaugeMetricValue(metrics.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(string(f.family))); queued < queuedBefore || queued == 0 {
				t.Errorf("last queued timestamp %v not updated (was %v)", queued, queuedBefore)
			}

			env.ipt.SetRestoreError(errors.New("injected failure"))
			if err := env.p.SyncNow(); err == nil {
				t.Fatal("sync succeeded although restore failed")
			}
			if hs.Health().Status[f.family].Healthy {
				t.Errorf("healthy after a failed sync")
			}

			env.ipt.SetRestoreError(nil)
			env.sync(t)
			st = hs.Health().Status[f.family]
			if !st.Healthy || st.LastUpdated.Before(first) {
				t.Errorf("after the repair sync: %+v, want healthy, updated no earlier than %v", st, first)
			}
		})
	}
}

// The per-sync metrics upstream's iptables mode exports.
func TestSyncMetrics(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			family := string(f.family)
			fullBefore, _ := testutil.GetHistogramMetricCount(metrics.SyncFullProxyRulesLatency.WithLabelValues(family))
			partialBefore, _ := testutil.GetHistogramMetricCount(metrics.SyncPartialProxyRulesLatency.WithLabelValues(family))
			allBefore, _ := testutil.GetHistogramMetricCount(metrics.SyncProxyRulesLatency.WithLabelValues(family))
			start := float64(time.Now().Unix())

			// ns1/svc1: internal policy Local, its only endpoint remote.
			// ns2/lb: external policy Local, its only endpoint remote.
			sc := scenario{
				services: []*v1.Service{
					f.stdService(func(s *v1.Service) {
						s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
					}),
					st.NewService("ns2", "lb", func(s *v1.Service) {
						s.Spec.ClusterIP = f.svc(2)
						s.Spec.Ports = []v1.ServicePort{st.ServicePort("p80", 80, v1.ProtocolTCP, 3002)}
						nodePortLB(f, v1.ServiceExternalTrafficPolicyLocal, 30002)(s)
					}),
				},
				slices: []*discovery.EndpointSlice{
					f.stdSlice(st.EP{IP: f.rpod(1), Node: "node2"}),
					st.Slice("ns2", "lb", "lb-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("p80", 8080, v1.ProtocolTCP)}, st.EP{IP: f.rpod(2), Node: "node2"}),
				},
			}
			env := setupScenario(t, f, sc)
			for _, policy := range []string{"internal", "external"} {
				if v, _ := testutil.GetGaugeMetricValue(metrics.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues(policy, family)); v != 1 {
					t.Errorf("no_local_endpoints_total{%s} = %v, want 1", policy, v)
				}
			}
			if last, _ := testutil.GetGaugeMetricValue(metrics.SyncProxyRulesLastTimestamp.WithLabelValues(family)); last < start {
				t.Errorf("last sync timestamp %v is before the test started (%v)", last, start)
			}

			// A slice change carrying the endpoints controller's trigger
			// time is measured as network programming latency. (Trigger
			// times from before the proxier started are ignored.)
			trigger := time.Now()
			progCount, _ := testutil.GetHistogramMetricCount(metrics.NetworkProgrammingLatency.WithLabelValues(family))
			progSum, _ := testutil.GetHistogramMetricValue(metrics.NetworkProgrammingLatency.WithLabelValues(family))
			updateSlice(env.p, sc.slices, 0, func(s *discovery.EndpointSlice) {
				s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: trigger.Format(time.RFC3339Nano)}
				s.Endpoints = append(s.Endpoints, discovery.Endpoint{
					Addresses: []string{f.pod(1)}, NodeName: ptr.To(testNodeName),
					Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
				})
			})
			time.Sleep(50 * time.Millisecond)
			env.sync(t)
			if c, _ := testutil.GetHistogramMetricCount(metrics.NetworkProgrammingLatency.WithLabelValues(family)); c != progCount+1 {
				t.Errorf("network programming latency observations = %d, want %d", c, progCount+1)
			}
			if s, _ := testutil.GetHistogramMetricValue(metrics.NetworkProgrammingLatency.WithLabelValues(family)); s-progSum < 0.05 {
				t.Errorf("network programming latency grew by %vs, want >= 0.05s", s-progSum)
			}
			// svc1 now has a local endpoint.
			if v, _ := testutil.GetGaugeMetricValue(metrics.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues("internal", family)); v != 0 {
				t.Errorf("no_local_endpoints_total{internal} = %v after a local endpoint appeared, want 0", v)
			}

			// One full sync (the first) and one partial one.
			if c, _ := testutil.GetHistogramMetricCount(metrics.SyncFullProxyRulesLatency.WithLabelValues(family)); c != fullBefore+1 {
				t.Errorf("full sync latency observations = %d, want %d", c, fullBefore+1)
			}
			if c, _ := testutil.GetHistogramMetricCount(metrics.SyncPartialProxyRulesLatency.WithLabelValues(family)); c != partialBefore+1 {
				t.Errorf("partial sync latency observations = %d, want %d", c, partialBefore+1)
			}
			if c, _ := testutil.GetHistogramMetricCount(metrics.SyncProxyRulesLatency.WithLabelValues(family)); c != allBefore+2 {
				t.Errorf("sync latency observations = %d, want %d", c, allBefore+2)
			}
		})
	}
}
