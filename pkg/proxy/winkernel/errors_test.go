package winkernel

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/component-base/metrics/testutil"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"

	"k8s.io/kube-proxy/pkg/proxy/metrics"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
	hcntest "k8s.io/kube-proxy/pkg/proxy/winkernel/testing"
)

func lbFailures(t *testing.T, op string, labels ...string) float64 {
	t.Helper()
	var v float64
	var err error
	switch op {
	case "create":
		v, err = testutil.GetCounterMetricValue(metrics.WinKernelLBCreateFailure.WithLabelValues(labels...))
	case "update":
		v, err = testutil.GetCounterMetricValue(metrics.WinKernelLBUpdateFailure.WithLabelValues(labels...))
	case "delete":
		v, err = testutil.GetCounterMetricValue(metrics.WinKernelLBDeleteFailure.WithLabelValues(labels...))
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// changed returns the calls that were made, without zero counts.
func calls(h *hcntest.Fake) map[string]int {
	out := h.Calls()
	maps.DeleteFunc(out, func(_ string, n int) bool { return n == 0 })
	return out
}

func TestNoOpSyncMakesNoHNSCall(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			e := newEnv(t, f, envOptions{networkType: hcnapi.NetworkTypeOverlay})
			e.start(web(f, func(s *v1.Service) { exposed(f, s) }), webSlice(f))
			e.hns.ResetCalls()
			e.sync()
			e.sync()
			if n := e.hns.TotalCalls(); n != 0 {
				t.Errorf("no-op syncs made %d HNS calls: %v", n, calls(e.hns))
			}
			// The periodic check is one read.
			e.p.RequestRulesCheck()
			e.sync()
			if diff := cmp.Diff(map[string]int{hcntest.OpGetNetworkByName: 1}, calls(e.hns)); diff != "" {
				t.Errorf("rules check calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEndpointChangeUpdatesInPlace(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			e := newEnv(t, f, envOptions{})
			e.start(web(f, func(s *v1.Service) { exposed(f, s) }), webSlice(f))
			before := e.hns.LoadBalancers()
			e.hns.ResetCalls()
			old := webSlice(f)
			e.p.OnEndpointSliceUpdate(old, webSlice(f, st.EP{IP: f.pod(1), Node: testNode}, st.EP{IP: f.rpod(2), Node: "node2"}))
			e.sync()
			// Four load balancers updated, the new remote endpoint created and
			// the old one, now unused, deleted; no listing.
			want := map[string]int{hcntest.OpCreateEndpoint: 1, hcntest.OpUpdateLoadBalancer: 4, hcntest.OpDeleteEndpoint: 1}
			if diff := cmp.Diff(want, calls(e.hns)); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			after := e.hns.LoadBalancers()
			for i := range before {
				if before[i].ID != after[i].ID {
					t.Errorf("load balancer %s replaced by %s, want an update in place", before[i].ID, after[i].ID)
				}
			}
		})
	}
}

func TestExistingRemoteEndpointIsAdopted(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			e := newEnv(t, f, envOptions{})
			e.start(web(f, nil), webSlice(f))
			// An earlier run left a remote endpoint for the address a
			// partial sync now needs: creating it fails, the network is
			// listed once and the endpoint adopted.
			e.hns.AddEndpoint(testNetwork, hcnapi.Endpoint{IPs: []string{f.rpod(2)}, Remote: true, MAC: mac(f.rpod(2))})
			e.hns.ResetCalls()
			e.p.OnEndpointSliceUpdate(webSlice(f), webSlice(f, st.EP{IP: f.pod(1), Node: testNode}, st.EP{IP: f.rpod(2), Node: "node2"}))
			e.sync()
			want := map[string]int{hcntest.OpCreateEndpoint: 1, hcntest.OpListEndpointsOfNetwork: 1, hcntest.OpUpdateLoadBalancer: 1, hcntest.OpDeleteEndpoint: 1}
			if diff := cmp.Diff(want, calls(e.hns)); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			fresh := newEnv(t, f, envOptions{})
			fresh.start(web(f, nil), webSlice(f, st.EP{IP: f.pod(1), Node: testNode}, st.EP{IP: f.rpod(2), Node: "node2"}))
			if diff := cmp.Diff(fresh.state(), e.state()); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFailedUpdateKeepsTheOldEndpoints(t *testing.T) {
	f := families[0]
	e := newEnv(t, f, envOptions{})
	e.start(web(f, nil), webSlice(f))
	e.hns.FailNext(hcntest.OpUpdateLoadBalancer, hcnapi.NewError(hcnapi.KindOther, "boom"))
	e.p.OnEndpointSliceUpdate(webSlice(f), webSlice(f, st.EP{IP: f.pod(1), Node: testNode}, st.EP{IP: f.rpod(2), Node: "node2"}))
	if err := e.p.SyncNow(); err == nil {
		t.Fatalf("sync succeeded, want the injected failure")
	}
	// The load balancer still balances over the old remote endpoint, which
	// must therefore still exist.
	want := []string{
		"LB " + f.svc(1) + " 80/TCP->8080 eps=" + sortedIPs(f.pod(1), f.rpod(1)),
		"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
		"EP remote " + f.rpod(2) + " mac=" + mac(f.rpod(2)),
	}
	if diff := cmp.Diff(want, e.state()); diff != "" {
		t.Errorf("after the failed update (-want +got):\n%s", diff)
	}
	e.sync()
	want = []string{
		"LB " + f.svc(1) + " 80/TCP->8080 eps=" + sortedIPs(f.pod(1), f.rpod(2)),
		"EP remote " + f.rpod(2) + " mac=" + mac(f.rpod(2)),
	}
	if diff := cmp.Diff(want, e.state()); diff != "" {
		t.Errorf("after the retry (-want +got):\n%s", diff)
	}
}

func TestSharedRemoteEndpoint(t *testing.T) {
	f := families[1]
	e := newEnv(t, f, envOptions{})
	shared := st.EP{IP: f.rpod(1), Node: "node2"}
	e.start(web(f, nil), webSlice(f, shared), web2(f),
		st.Slice("ns", "api", "api-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("http", 8443, v1.ProtocolTCP)}, shared))
	e.p.OnServiceDelete(web(f, nil))
	e.sync()
	want := []string{
		"LB " + f.svc(2) + " 443/TCP->8443 eps=" + f.rpod(1) + " flags=IPv6",
		"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
	}
	if diff := cmp.Diff(want, e.state()); diff != "" {
		t.Errorf("one user left (-want +got):\n%s", diff)
	}
	e.p.OnServiceDelete(web2(f))
	e.sync()
	if got := e.state(); len(got) != 0 {
		t.Errorf("nothing uses the endpoint, but HNS has %v", got)
	}
}

func TestDuplicateRemoteEndpointOfALocalIP(t *testing.T) {
	f := families[0]
	e := newEnv(t, f, envOptions{})
	// Windows Server 2019 can leave a remote endpoint with a local pod's IP.
	e.hns.AddEndpoint(testNetwork, hcnapi.Endpoint{IPs: []string{f.pod(1)}, Remote: true, MAC: mac(f.pod(1))})
	e.start(web(f, nil), webSlice(f, st.EP{IP: f.pod(1), Node: testNode}))
	want := []string{"LB " + f.svc(1) + " 80/TCP->8080 eps=" + f.pod(1)}
	if diff := cmp.Diff(want, e.state()); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

func TestNewRemoteSubnetIsReadBeforeCreatingAnEndpoint(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			e := newEnv(t, f, envOptions{networkType: hcnapi.NetworkTypeOverlay})
			e.start(web(f, nil), webSlice(f))
			// A third node joins: its pod subnet's policy reaches the network
			// after kube-proxy last read it.
			node3, subnet3, pod3 := "192.168.0.4", "10.100.0.0/16", "10.100.0.5"
			if f.family == v1.IPv6Protocol {
				node3, subnet3, pod3 = "fd00:192::4", "fd00:246::/64", "fd00:246::5"
			}
			e.hns.SetRemoteSubnets(testNetwork,
				hcnapi.RemoteSubnet{DestinationPrefix: f.localSubnet, ProviderAddress: f.node},
				hcnapi.RemoteSubnet{DestinationPrefix: f.remoteSubnet, ProviderAddress: f.otherNode},
				hcnapi.RemoteSubnet{DestinationPrefix: subnet3, ProviderAddress: node3})
			e.hns.ResetCalls()
			e.p.OnEndpointSliceUpdate(webSlice(f), webSlice(f, st.EP{IP: f.pod(1), Node: testNode}, st.EP{IP: pod3, Node: "node3"}))
			e.sync()
			if n := e.hns.Calls()[hcntest.OpGetNetworkByName]; n != 1 {
				t.Errorf("%d network reads, want 1", n)
			}
			found := false
			for _, s := range e.state() {
				if s == "EP remote "+pod3+" mac="+mac(pod3)+" pa="+node3 {
					found = true
				}
			}
			if !found {
				t.Errorf("no remote endpoint for %s behind %s:\n%s", pod3, node3, strings.Join(e.state(), "\n"))
			}
		})
	}
}

func TestRootEndpointAppearingLater(t *testing.T) {
	f := families[0]
	e := newEnv(t, f, envOptions{config: func(c *kubeproxyconfig.KubeProxyConfiguration) { c.Winkernel.ForwardHealthCheckVip = true }})
	svc := web(f, func(s *v1.Service) { exposed(f, s); local(f, s) })
	e.start(svc, webSlice(f))
	hc := "LB " + f.lb + " 32000/TCP->32000 eps=gw"
	if slices.Contains(e.state(), hc) {
		t.Fatalf("health check forward without a root endpoint")
	}
	e.hns.AddEndpoint(testNetwork, hcnapi.Endpoint{Name: testRootEP, IPs: []string{f.node}})
	e.p.RequestRulesCheck()
	e.sync()
	if !slices.Contains(e.state(), hc) {
		t.Errorf("no health check forward once the root endpoint exists:\n%s", strings.Join(e.state(), "\n"))
	}
}

func TestFullSyncRepairsWhatWasRemovedBehindItsBack(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			objs := []any{web(f, func(s *v1.Service) { exposed(f, s) }), webSlice(f)}
			e := newEnv(t, f, envOptions{})
			e.start(objs...)
			want := e.state()
			// The CNI plugin recreated the local pod's endpoint (new ID),
			// someone deleted our remote endpoint and one load balancer.
			for _, x := range e.hns.Endpoints() {
				if x.IPs[0] == f.pod(1) || x.IPs[0] == f.rpod(1) {
					if err := e.hns.DeleteEndpoint(x.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			e.hns.AddEndpoint(testNetwork, hcnapi.Endpoint{IPs: []string{f.pod(1)}, MAC: "00-15-5d-01-00-01"})
			if err := e.hns.DeleteLoadBalancer(e.hns.LoadBalancers()[0].ID); err != nil {
				t.Fatal(err)
			}
			e.p.RequestFullSync()
			e.sync()
			if diff := cmp.Diff(want, e.state()); diff != "" {
				t.Errorf("after the full sync (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUpdateNotImplementedFallsBackToRecreate(t *testing.T) {
	f := families[0]
	e := newEnv(t, f, envOptions{})
	e.start(web(f, nil), webSlice(f))
	// The proxier was told HNS can update; this HNS cannot.
	feats := hcntest.AllFeatures()
	feats.ModifyLoadbalancer = false
	e.hns.SetFeatures(feats)
	e.hns.ResetCalls()
	e.p.OnEndpointSliceUpdate(webSlice(f), webSlice(f, st.EP{IP: f.pod(1), Node: testNode}))
	e.sync()
	want := map[string]int{hcntest.OpUpdateLoadBalancer: 1, hcntest.OpDeleteLoadBalancer: 1, hcntest.OpCreateLoadBalancer: 1, hcntest.OpDeleteEndpoint: 1}
	if diff := cmp.Diff(want, calls(e.hns)); diff != "" {
		t.Errorf("first change (-want +got):\n%s", diff)
	}
	// Not asked again.
	e.hns.ResetCalls()
	e.p.OnEndpointSliceUpdate(webSlice(f, st.EP{IP: f.pod(1), Node: testNode}), webSlice(f, st.EP{IP: f.pod(2), Node: testNode}))
	e.sync()
	want = map[string]int{hcntest.OpListEndpointsOfNetwork: 1, hcntest.OpDeleteLoadBalancer: 1, hcntest.OpCreateLoadBalancer: 1}
	if diff := cmp.Diff(want, calls(e.hns)); diff != "" {
		t.Errorf("second change (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"LB " + f.svc(1) + " 80/TCP->8080 eps=" + f.pod(2)}, e.state()); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

func TestWinProxyOptimizationDisabledRecreates(t *testing.T) {
	f := families[0]
	e := newEnv(t, f, envOptions{})
	svc := web(f, func(s *v1.Service) { s.Annotations = map[string]string{"winProxyOptimization": "DISABLED"} })
	e.start(svc, webSlice(f))
	e.hns.ResetCalls()
	e.p.OnEndpointSliceUpdate(webSlice(f), webSlice(f, st.EP{IP: f.pod(1), Node: testNode}))
	e.sync()
	want := map[string]int{hcntest.OpDeleteLoadBalancer: 1, hcntest.OpCreateLoadBalancer: 1, hcntest.OpDeleteEndpoint: 1}
	if diff := cmp.Diff(want, calls(e.hns)); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestPolicyAlreadyExists(t *testing.T) {
	f := families[0]
	leftover := func(e *env, vip string, port uint16) {
		e.hns.AddLoadBalancer(hcnapi.LoadBalancer{
			FrontendVIPs: []string{vip},
			PortMappings: []hcnapi.PortMapping{{Protocol: 6, InternalPort: 9999, ExternalPort: port}},
		})
	}
	t.Run("a leftover holding the frontend at startup is replaced", func(t *testing.T) {
		e := newEnv(t, f, envOptions{})
		leftover(e, f.svc(1), 80)
		e.start(web(f, nil), webSlice(f))
		want := []string{
			"LB " + f.svc(1) + " 80/TCP->8080 eps=" + sortedIPs(f.pod(1), f.rpod(1)),
			"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
		}
		if diff := cmp.Diff(want, e.state()); diff != "" {
			t.Errorf("state (-want +got):\n%s", diff)
		}
		c := calls(e.hns)
		if c[hcntest.OpCreateLoadBalancer] != 2 || c[hcntest.OpDeleteLoadBalancer] != 1 {
			t.Errorf("want create, delete the holder, create again; got %v", c)
		}
	})
	t.Run("a foreign load balancer appearing later is replaced in a partial sync", func(t *testing.T) {
		e := newEnv(t, f, envOptions{})
		e.start()
		leftover(e, f.svc(1), 80)
		e.add(web(f, nil), webSlice(f))
		e.sync()
		want := []string{
			"LB " + f.svc(1) + " 80/TCP->8080 eps=" + sortedIPs(f.pod(1), f.rpod(1)),
			"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
		}
		if diff := cmp.Diff(want, e.state()); diff != "" {
			t.Errorf("state (-want +got):\n%s", diff)
		}
	})
	t.Run("two holders: nothing deleted, the failure is counted and retried", func(t *testing.T) {
		e := newEnv(t, f, envOptions{})
		e.start()
		leftover(e, f.svc(1), 80)
		leftover(e, f.svc(1), 80)
		before := lbFailures(t, "create", "IPv4", "clusterip", "port_already_exists")
		e.add(web(f, nil), webSlice(f))
		err := e.p.SyncNow()
		if err == nil || !strings.Contains(err.Error(), "already exists") {
			t.Fatalf("sync error = %v, want the port-already-exists failure", err)
		}
		if got := lbFailures(t, "create", "IPv4", "clusterip", "port_already_exists"); got != before+1 {
			t.Errorf("create failures = %v, want %v", got, before+1)
		}
		if n := len(e.hns.LoadBalancers()); n != 2 {
			t.Errorf("%d load balancers, want the two holders left alone", n)
		}
		if !e.p.NeedsFullSync() {
			t.Errorf("a failed sync must be retried as a full one")
		}
	})
}

func TestHNSNotRunning(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			e := newEnv(t, f, envOptions{})
			e.start(web(f, nil), webSlice(f))
			before := e.state()
			e.hns.SetRunning(false)
			e.add(web2(f), webSlice2(f))
			err := e.p.SyncNow()
			if err == nil || !IsHnsNotRunningError(err) {
				t.Fatalf("sync error = %v, want HNS not running", err)
			}
			// A full sync while HNS is down fails the same way, touching nothing.
			err = e.p.SyncNow()
			if err == nil || !IsHnsNotRunningError(err) {
				t.Fatalf("full sync error = %v, want HNS not running", err)
			}
			if diff := cmp.Diff(before, e.state()); diff != "" {
				t.Errorf("state changed while HNS was down (-before +after):\n%s", diff)
			}
			e.hns.SetRunning(true)
			e.sync()
			fresh := newEnv(t, f, envOptions{})
			fresh.start(web(f, nil), webSlice(f), web2(f), webSlice2(f))
			if diff := cmp.Diff(fresh.state(), e.state()); diff != "" {
				t.Errorf("after HNS came back (-want +got):\n%s", diff)
			}
		})
	}
}

func web2(f fam) *v1.Service {
	return st.NewService("ns", "api", func(s *v1.Service) {
		s.Spec.ClusterIP = f.svc(2)
		s.Spec.Ports = []v1.ServicePort{st.ServicePort("http", 443, v1.ProtocolTCP, 0)}
	})
}

func webSlice2(f fam) *discovery.EndpointSlice {
	return st.Slice("ns", "api", "api-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("http", 8443, v1.ProtocolTCP)},
		st.EP{IP: f.pod(3), Node: testNode}, st.EP{IP: f.rpod(3), Node: "node2"})
}

func addLocalPods(e *env) {
	for i := 1; i <= 9; i++ {
		e.hns.AddEndpoint(testNetwork, hcnapi.Endpoint{IPs: []string{e.f.pod(i)}, MAC: fmt.Sprintf("00-15-5d-01-00-%02x", i)})
	}
}

func TestNetworkRecreatedIsReprogrammed(t *testing.T) {
	for _, f := range families {
		for _, netType := range []string{hcnapi.NetworkTypeL2Bridge, hcnapi.NetworkTypeOverlay} {
			t.Run(string(f.family)+"/"+netType, func(t *testing.T) {
				objs := []any{web(f, func(s *v1.Service) { exposed(f, s) }), webSlice(f), web2(f), webSlice2(f)}
				e := newEnv(t, f, envOptions{networkType: netType})
				e.start(objs...)
				want := e.state()

				// HNS restarted: a new network, the CNI plugin's endpoints
				// again, our remote endpoints gone, load balancers dangling.
				e.hns.RecreateNetwork(testNetwork)
				addLocalPods(e)
				e.p.RequestRulesCheck()
				e.sync()
				if diff := cmp.Diff(want, e.state()); diff != "" {
					t.Errorf("after the network was recreated (-want +got):\n%s", diff)
				}
				if e.p.NeedsFullSync() {
					t.Errorf("the resync should have succeeded")
				}
			})
		}
	}
}

func TestNetworkGone(t *testing.T) {
	f := families[0]
	objs := []any{web(f, nil), webSlice(f)}
	e := newEnv(t, f, envOptions{})
	e.start(objs...)
	want := e.state()
	e.hns.DeleteNetwork(testNetwork)
	e.p.RequestRulesCheck()
	err := e.p.SyncNow()
	if !hcnapi.IsNetworkNotFound(err) {
		t.Fatalf("sync error = %v, want network not found", err)
	}
	// Retried (full) while the network is missing: same error, no write.
	e.hns.ResetCalls()
	if err := e.p.SyncNow(); !hcnapi.IsNetworkNotFound(err) {
		t.Fatalf("sync error = %v, want network not found", err)
	}
	if diff := cmp.Diff(map[string]int{hcntest.OpGetNetworkByName: 1}, calls(e.hns)); diff != "" {
		t.Errorf("calls while the network is missing (-want +got):\n%s", diff)
	}
	// The CNI plugin brings it back: everything is programmed again and the
	// dangling load balancers are swept.
	e.hns.AddNetwork(testNetwork, hcnapi.NetworkTypeL2Bridge,
		hcnapi.RemoteSubnet{DestinationPrefix: f.localSubnet, ProviderAddress: f.node},
		hcnapi.RemoteSubnet{DestinationPrefix: f.remoteSubnet, ProviderAddress: f.otherNode})
	addLocalPods(e)
	e.sync()
	if diff := cmp.Diff(want, e.state()); diff != "" {
		t.Errorf("after the network came back (-want +got):\n%s", diff)
	}
}

func TestStaleLoadBalancersAreRetriedBounded(t *testing.T) {
	f := families[0]
	e := newEnv(t, f, envOptions{})
	var objs []any
	for i := range 25 {
		objs = append(objs, st.NewService("ns", fmt.Sprintf("s%d", i), func(s *v1.Service) {
			s.Spec.ClusterIP = f.svc(10 + i)
			s.Spec.Ports = []v1.ServicePort{st.ServicePort("p", 80, v1.ProtocolTCP, 0)}
		}), st.Slice("ns", fmt.Sprintf("s%d", i), "sl", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("p", 8080, v1.ProtocolTCP)},
			st.EP{IP: f.pod(1), Node: testNode}))
	}
	e.start(objs...)
	// Every deletion fails twice (the attempt and upstream's one retry), and
	// so does the same sync's retry of the first 20 stale ones.
	boom := hcnapi.NewError(hcnapi.KindOther, "boom")
	for range 50 + 40 {
		e.hns.FailNext(hcntest.OpDeleteLoadBalancer, boom)
	}
	before := lbFailures(t, "delete", "IPv4", "clusterip", "other")
	for _, o := range objs {
		if s, ok := o.(*v1.Service); ok {
			e.p.OnServiceDelete(s)
		}
	}
	e.sync()
	if got := lbFailures(t, "delete", "IPv4", "clusterip", "other"); got != before+45 {
		t.Errorf("delete failures = %v, want %v", got, before+45)
	}
	if n := len(e.p.backend.stale); n != 25 {
		t.Fatalf("%d stale load balancers, want 25", n)
	}
	// Each later sync, even without changes, retries at most 20.
	e.hns.ResetCalls()
	e.sync()
	if n := len(e.p.backend.stale); n != 5 {
		t.Errorf("%d stale after one retry, want 5", n)
	}
	if n := e.hns.Calls()[hcntest.OpDeleteLoadBalancer]; n != MAX_COUNT_STALE_LOADBALANCERS {
		t.Errorf("%d deletions in one sync, want %d", n, MAX_COUNT_STALE_LOADBALANCERS)
	}
	e.sync()
	if n := len(e.p.backend.stale); n != 0 || len(e.hns.LoadBalancers()) != 0 {
		t.Errorf("%d stale, %d load balancers left, want none", n, len(e.hns.LoadBalancers()))
	}
	e.hns.ResetCalls()
	e.sync()
	if n := e.hns.TotalCalls(); n != 0 {
		t.Errorf("sync after the queue drained made %d calls", n)
	}
}

func TestCreateAndUpdateFailureMetrics(t *testing.T) {
	f := families[1]
	e := newEnv(t, f, envOptions{})
	e.start(web(f, func(s *v1.Service) { exposed(f, s) }), webSlice(f))
	updateFailures := func() float64 {
		total := 0.0
		for _, typ := range []string{"clusterip", "nodeport", "externalip", "ingressip"} {
			total += lbFailures(t, "update", "IPv6", typ, "invalid_ip")
		}
		return total
	}
	before := updateFailures()
	// The first update goes through, the second fails.
	e.hns.FailNext(hcntest.OpUpdateLoadBalancer, nil, hcnapi.NewError(hcnapi.KindInvalidIP, "bad ip"))
	e.p.OnEndpointSliceUpdate(webSlice(f), webSlice(f, st.EP{IP: f.pod(1), Node: testNode}))
	err := e.p.SyncNow()
	if err == nil {
		t.Fatalf("sync succeeded, want the injected update failure")
	}
	if got := updateFailures(); got != before+1 {
		t.Errorf("update failures = %v, want %v", got, before+1)
	}
	// The retry (a full sync) converges.
	e.sync()
	fresh := newEnv(t, f, envOptions{})
	fresh.start(web(f, func(s *v1.Service) { exposed(f, s) }), webSlice(f, st.EP{IP: f.pod(1), Node: testNode}))
	if diff := cmp.Diff(fresh.state(), e.state()); diff != "" {
		t.Errorf("after the retry (-want +got):\n%s", diff)
	}
}

func TestDualStackProxiersLeaveEachOthersLoadBalancers(t *testing.T) {
	v4, v6 := families[0], families[1]
	e4 := newEnv(t, v4, envOptions{noLocalPods: true})
	// The IPv6 proxier shares the IPv4 one's HNS; each local pod has one
	// endpoint with an address of each family.
	for i := 1; i <= 9; i++ {
		e4.hns.AddEndpoint(testNetwork, hcnapi.Endpoint{IPs: []string{v4.pod(i), v6.pod(i)}})
	}
	e6 := &env{t: t, f: v6, hns: e4.hns, cfg: e4.cfg, mac: fakeMacs{}}
	e6.p = e6.newProxier()
	e4.start(web(v4, func(s *v1.Service) { exposed(v4, s); local(v4, s) }), webSlice(v4))
	e6.start(web(v6, func(s *v1.Service) { exposed(v6, s); local(v6, s) }), webSlice(v6))
	both := e4.state()
	if n := countLBs(both); n != 8 {
		t.Fatalf("%d load balancers, want 4 per family:\n%s", n, strings.Join(both, "\n"))
	}
	e4.p.RequestFullSync()
	e4.sync()
	e6.p.RequestFullSync()
	e6.sync()
	if diff := cmp.Diff(both, e4.state()); diff != "" {
		t.Errorf("full syncs disturbed the other family (-want +got):\n%s", diff)
	}
}

func TestOneEndpointChangeAt10kServicesTouchesOneService(t *testing.T) {
	if testing.Short() {
		t.Skip("10k services")
	}
	f := families[0]
	e := newEnv(t, f, envOptions{})
	const n = 10000
	var objs []any
	for i := range n {
		objs = append(objs, svcN(f, i), sliceN(f, i, 1, false))
	}
	e.start(objs...)
	if got := len(e.hns.LoadBalancers()); got != n {
		t.Fatalf("%d load balancers, want %d", got, n)
	}
	e.hns.ResetCalls()
	e.p.OnEndpointSliceUpdate(sliceN(f, 4242, 1, false), sliceN(f, 4242, 1, true))
	e.sync()
	want := map[string]int{hcntest.OpCreateEndpoint: 1, hcntest.OpUpdateLoadBalancer: 1, hcntest.OpDeleteEndpoint: 1}
	if diff := cmp.Diff(want, calls(e.hns)); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// svcN and sliceN build the scale tests' Services: the i-th cluster IP,
// eps remote pods of its own; changed replaces the last one.
func svcN(f fam, i int) *v1.Service {
	return st.NewService("ns", fmt.Sprintf("s%05d", i), func(s *v1.Service) {
		s.Spec.ClusterIP = f.svc(i + 1)
		s.Spec.Ports = []v1.ServicePort{st.ServicePort("p", 80, v1.ProtocolTCP, 0)}
	})
}

func sliceN(f fam, i, eps int, changed bool) *discovery.EndpointSlice {
	var list []st.EP
	for j := range eps {
		list = append(list, st.EP{IP: f.rpod(i*eps + j), Node: "node2"})
	}
	if changed {
		list[eps-1].IP = f.rpod(4_000_000 + i)
	}
	return st.Slice("ns", fmt.Sprintf("s%05d", i), "sl", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("p", 8080, v1.ProtocolTCP)}, list...)
}

func TestSyncLatencyIsRecorded(t *testing.T) {
	f := families[1]
	count := func() uint64 {
		n, err := testutil.GetHistogramMetricCount(metrics.SyncProxyRulesLatency.WithLabelValues(string(f.family)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	e := newEnv(t, f, envOptions{})
	e.start(web(f, nil), webSlice(f))
	e.p.OnEndpointSliceUpdate(webSlice(f), webSlice(f, st.EP{IP: f.pod(2), Node: testNode}))
	e.sync()
	if got := count(); got != before+2 {
		t.Errorf("sync_proxy_rules_duration_seconds count = %d, want %d", got, before+2)
	}
}

// One Service's slice says an address is on this node, another's that it is
// elsewhere: both use the CNI plugin's local endpoint, which kube-proxy never
// deletes.
func TestSameAddressLocalForOneServiceRemoteForAnother(t *testing.T) {
	f := families[0]
	e := newEnv(t, f, envOptions{})
	e.start(web(f, nil), webSlice(f, st.EP{IP: f.pod(1), Node: testNode}), web2(f),
		st.Slice("ns", "api", "api-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("http", 8443, v1.ProtocolTCP)}, st.EP{IP: f.pod(1), Node: "node2"}))
	want := []string{
		"LB " + f.svc(1) + " 80/TCP->8080 eps=" + f.pod(1),
		"LB " + f.svc(2) + " 443/TCP->8443 eps=" + f.pod(1),
	}
	if diff := cmp.Diff(want, e.state()); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	e.p.OnServiceDelete(web(f, nil))
	e.p.OnServiceDelete(web2(f))
	e.hns.ResetCalls()
	e.sync()
	if n := e.hns.Calls()[hcntest.OpDeleteEndpoint]; n != 0 {
		t.Errorf("%d endpoint deletions, want none (the endpoint is the CNI plugin's)", n)
	}
}

// Zone hints narrow the endpoints once the node's zone is known: the brain's
// topology decision, which upstream's winkernel does not apply.
func TestTopologyHints(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			e := newEnv(t, f, envOptions{})
			e.start(web(f, nil), webSlice(f, st.EP{IP: f.pod(1), Node: testNode, Zones: []string{"a"}}, st.EP{IP: f.rpod(1), Node: "node2", Zones: []string{"b"}}))
			if got := e.state()[0]; !strings.Contains(got, sortedIPs(f.pod(1), f.rpod(1))) {
				t.Errorf("before the zone is known: %s", got)
			}
			e.p.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "a"})
			e.sync()
			want := []string{"LB " + f.svc(1) + " 80/TCP->8080 eps=" + f.pod(1) + flags(f.v6())}
			if diff := cmp.Diff(want, e.state()); diff != "" {
				t.Errorf("in zone a (-want +got):\n%s", diff)
			}
		})
	}
}
