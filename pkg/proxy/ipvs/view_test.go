//go:build linux

package ipvs

import (
	"errors"
	"net"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2/ktesting"
	utilipset "k8s.io/net-utils/ipset"
	ipsettest "k8s.io/net-utils/ipset/testing"
	utiliptables "k8s.io/net-utils/iptables"
	utilipvs "k8s.io/net-utils/ipvs"
	ipvstest "k8s.io/net-utils/ipvs/testing"

	ipvstesting "k8s.io/kube-proxy/pkg/proxy/ipvs/testing"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

func virtualServers(t testing.TB, env *fakeEnv) []string {
	t.Helper()
	vss, err := env.ipvs.GetVirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, vs := range vss {
		out = append(out, vs.String())
	}
	sort.Strings(out)
	return out
}

func bound(t testing.TB, env *fakeEnv) []string {
	t.Helper()
	b, err := env.netlink.ListBindAddress(defaultDummyDevice)
	if err != nil {
		t.Fatal(err)
	}
	b = slices.Clone(b)
	sort.Strings(b)
	return b
}

func entries(t testing.TB, env *fakeEnv, set string) []string {
	t.Helper()
	e, err := env.ipset.ListEntries(set)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestStaleStateRemoved(t *testing.T) {
	for _, f := range fams {
		t.Run(string(f.family), func(t *testing.T) {
			p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
			web := webService(f, func(s *v1.Service) { s.Spec.ExternalIPs = []string{f.extIP} })
			p.OnServiceAdd(web)
			p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}))
			syncAll(t, p)
			if got, want := bound(t, env), sets.List(sets.New(f.svc(1), f.extIP)); !slices.Equal(got, want) {
				t.Fatalf("bound %v, want %v", got, want)
			}
			if n := len(virtualServers(t, env)); n != 3 {
				t.Fatalf("%d virtual servers, want 3: %v", n, virtualServers(t, env))
			}
			p.OnServiceDelete(web)
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if got := bound(t, env); len(got) != 0 {
				t.Errorf("addresses left on %s: %v", defaultDummyDevice, got)
			}
			if got := virtualServers(t, env); len(got) != 0 {
				t.Errorf("virtual servers left: %v", got)
			}
			for _, set := range []setID{setClusterIP, setExternalIP, setNodePortTCP, setIPVS} {
				if got := entries(t, env, p.sets[set].Name); len(got) != 0 {
					t.Errorf("set %s left with %v", p.sets[set].Name, got)
				}
			}
		})
	}
}

func TestFullSyncRemovesLeftoversButExcludedAndOtherFamily(t *testing.T) {
	p, env := newFakeProxier(t, v1.IPv4Protocol, []string{"192.168.0.2"}, fakeProxierOptions{excludeCIDRs: []string{"10.99.0.0/16", "fd99::/64"}})
	for _, vs := range []*utilipvs.VirtualServer{
		{Address: net.ParseIP("172.30.9.9"), Port: 80, Protocol: "TCP", Scheduler: "rr"},  // stale: deleted
		{Address: net.ParseIP("10.99.1.1"), Port: 80, Protocol: "TCP", Scheduler: "rr"},   // excluded: kept
		{Address: net.ParseIP("fd00:172::9"), Port: 80, Protocol: "TCP", Scheduler: "rr"}, // IPv6: not ours
	} {
		if err := env.ipvs.AddVirtualServer(vs); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = env.netlink.EnsureDummyDevice(defaultDummyDevice)
	_, _ = env.netlink.EnsureAddressBind("172.30.9.9", defaultDummyDevice)
	syncAll(t, p)
	if got, want := virtualServers(t, env), []string{"10.99.1.1:80/TCP", "[fd00:172::9]:80/TCP"}; !slices.Equal(got, want) {
		t.Errorf("virtual servers %v, want %v", got, want)
	}
	if got := bound(t, env); len(got) != 0 {
		t.Errorf("stale address still bound: %v", got)
	}
}

func TestExternalIPOnNodeIsNotBound(t *testing.T) {
	f := fams[0]
	p, env := newFakeProxier(t, f.family, []string{f.node, f.extIP}, fakeProxierOptions{})
	p.OnServiceAdd(webService(f, func(s *v1.Service) { s.Spec.ExternalIPs = []string{f.extIP} }))
	syncAll(t, p)
	if got := bound(t, env); !slices.Equal(got, []string{f.svc(1)}) {
		t.Errorf("bound %v, want only the cluster IP", got)
	}
	if !slices.Contains(virtualServers(t, env), f.extIP+":80/TCP") {
		t.Errorf("no virtual server for the external IP: %v", virtualServers(t, env))
	}
}

func TestNodePortAddresses(t *testing.T) {
	f := fams[0]
	p, env := newFakeProxier(t, f.family, []string{f.node, "192.168.5.5"}, fakeProxierOptions{nodePortAddresses: []string{"192.168.5.0/24"}})
	p.OnServiceAdd(webService(f, nil))
	syncAll(t, p)
	got := virtualServers(t, env)
	if !slices.Contains(got, "192.168.5.5:30080/TCP") || slices.Contains(got, f.node+":30080/TCP") {
		t.Errorf("virtual servers %v: want the node port only on 192.168.5.5", got)
	}
}

func TestSchedulerAndFlags(t *testing.T) {
	for _, sched := range []string{"", "rr", "lc", "sh", "mh"} {
		t.Run(sched, func(t *testing.T) {
			f := fams[0]
			p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{scheduler: sched})
			p.OnServiceAdd(webService(f, nil))
			syncAll(t, p)
			want := sched
			if want == "" {
				want = "rr"
			}
			vss, _ := env.ipvs.GetVirtualServers()
			for _, vs := range vss {
				if vs.Scheduler != want {
					t.Errorf("%s scheduler %q, want %q", vs, vs.Scheduler, want)
				}
				if hash := vs.Flags&utilipvs.FlagSourceHash != 0; hash != (want == "mh") {
					t.Errorf("%s flags %#x: source hash flag wanted only for mh", vs, vs.Flags)
				}
			}
		})
	}
}

func TestSysctlsAndTimeouts(t *testing.T) {
	for _, tc := range []struct {
		kernel    string
		strictARP bool
		want      map[string]int
		absent    []string
	}{
		{kernel: "4.0", want: map[string]int{sysctlVSConnTrack: 1, sysctlExpireNoDestConn: 1, sysctlExpireQuiescentTemplate: 1, sysctlForward: 1},
			absent: []string{sysctlConnReuse, sysctlArpIgnore, sysctlArpAnnounce}},
		{kernel: "4.19", want: map[string]int{sysctlConnReuse: 0}},
		{kernel: "5.9", absent: []string{sysctlConnReuse}},
		{kernel: "5.15", strictARP: true, want: map[string]int{sysctlArpIgnore: 1, sysctlArpAnnounce: 2}},
	} {
		t.Run(tc.kernel, func(t *testing.T) {
			_, env := newFakeProxier(t, v1.IPv4Protocol, []string{"192.168.0.2"}, fakeProxierOptions{
				kernelVersion: tc.kernel, strictARP: tc.strictARP, tcpTimeout: 900 * time.Second, udpTimeout: 30 * time.Second})
			got := env.sysctl.Snapshot()
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("sysctl %s = %d (set %v), want %d", k, g, ok, v)
				}
			}
			written := sets.New[string]()
			for _, w := range env.sysctl.Writes {
				written.Insert(w.Name)
			}
			for _, k := range tc.absent {
				if written.Has(k) {
					t.Errorf("sysctl %s was written", k)
				}
			}
			if env.ipvs.TCPTimeout != 900*time.Second || env.ipvs.UDPTimeout != 30*time.Second || env.ipvs.TCPFinTimeout != 0 {
				t.Errorf("timeouts tcp=%v tcpfin=%v udp=%v", env.ipvs.TCPTimeout, env.ipvs.TCPFinTimeout, env.ipvs.UDPTimeout)
			}
		})
	}
}

func TestIPv6SetNames(t *testing.T) {
	p, env := newFakeProxier(t, v1.IPv6Protocol, []string{"fd00:192::2"}, fakeProxierOptions{})
	syncAll(t, p)
	names, _ := env.ipset.ListSets()
	for _, n := range names {
		if !strings.HasPrefix(n, "KUBE-6-") || len(n) > 31 {
			t.Errorf("IPv6 set %q", n)
		}
		if spec := env.ipset.Sets[n]; spec.HashFamily != "inet6" {
			t.Errorf("set %s family %q", n, spec.HashFamily)
		}
	}
	for _, want := range []string{"KUBE-6-CLUSTER-IP", "KUBE-6-LOAD-BALANCER-SOURCE-CID", "KUBE-6-NODE-PORT-LOCAL-SCTP-HAS"} {
		if !slices.Contains(names, want) {
			t.Errorf("no set %s in %v", want, names)
		}
	}
}

// TestSyncCosts checks the batching: a full sync makes a constant number of
// ipset invocations whatever the size, and a one-endpoint change touches
// one virtual server's real servers and never lists virtual servers.
func TestSyncCosts(t *testing.T) {
	f := fams[0]
	p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
	counter := &countingIPVS{Interface: env.ipvs}
	p.ipvs = counter
	p.gtm.ipvs = counter
	for i := range 50 {
		s := st.NewService("ns", "svc"+itoa(i), func(s *v1.Service) {
			s.Spec.ClusterIP = "172.30." + itoa(i/250) + "." + itoa(i%250+1)
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports = []v1.ServicePort{st.ServicePort("p", 80, v1.ProtocolTCP, int32(30000+i))}
		})
		p.OnServiceAdd(s)
		p.OnEndpointSliceAdd(st.Slice("ns", s.Name, s.Name+"-1", discovery.AddressTypeIPv4, []discovery.EndpointPort{st.SlicePort("p", 8080, v1.ProtocolTCP)},
			st.EP{IP: "10.0.2." + itoa(i+1)}, local("10.0.1."+itoa(i+1))))
	}
	syncAll(t, p)
	if env.ipset.Restores > 3 {
		t.Errorf("full sync made %d ipset restores, want at most 3 (sets, then entries)", env.ipset.Restores)
	}
	env.ipset.Restores = 0
	counter.reset()
	old := st.Slice("ns", "svc7", "svc7-1", discovery.AddressTypeIPv4, []discovery.EndpointPort{st.SlicePort("p", 8080, v1.ProtocolTCP)},
		st.EP{IP: "10.0.2.8"}, local("10.0.1.8"))
	p.OnEndpointSliceUpdate(old, st.Slice("ns", "svc7", "svc7-1", discovery.AddressTypeIPv4, []discovery.EndpointPort{st.SlicePort("p", 8080, v1.ProtocolTCP)},
		st.EP{IP: "10.0.2.8"}, st.EP{IP: "10.0.2.200"}, local("10.0.1.8")))
	if err := p.SyncNow(); err != nil {
		t.Fatal(err)
	}
	if counter.calls["GetVirtualServers"] != 0 {
		t.Errorf("partial sync listed every virtual server")
	}
	// One real server added to the cluster IP and the node port virtual server.
	if got := counter.total(); got != 2 || counter.calls["AddRealServer"] != 2 {
		t.Errorf("one-endpoint change made IPVS calls %v, want 2 AddRealServer", counter.calls)
	}
	if env.ipset.Restores != 0 {
		t.Errorf("a remote endpoint change wrote ip sets (%d restores)", env.ipset.Restores)
	}
}

func TestIPTablesRestoreFailure(t *testing.T) {
	f := fams[0]
	p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
	p.OnServiceAdd(webService(f, nil))
	syncAll(t, p)
	before := env.dump(t)
	env.ipt.SetRestoreError(errors.New("injected"))
	lb := lbService(f, nil)
	p.OnServiceUpdate(webService(f, nil), lb)
	if err := p.SyncNow(); err == nil {
		t.Fatal("sync with a failing iptables-restore succeeded")
	}
	if !p.NeedsFullSync() {
		t.Error("a failed sync does not make the next one full")
	}
	if !strings.Contains(env.dump(t), "KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT") {
		t.Errorf("failed restore lost the previous rules:\n%s\nbefore:\n%s", env.dump(t), before)
	}
	env.ipt.SetRestoreError(nil)
	if err := p.SyncNow(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(env.dump(t), "--match-set KUBE-LOAD-BALANCER dst,dst -j KUBE-LOAD-BALANCER") {
		t.Errorf("retry did not write the load balancer rules:\n%s", env.dump(t))
	}
}

func TestCanUseIPVSProxier(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	fake := ipvstest.NewFake()
	if err := CanUseIPVSProxier(ctx, fake, ipsettest.NewFake("v7.17"), "lc"); err != nil {
		t.Errorf("CanUseIPVSProxier: %v", err)
	}
	if vss, _ := fake.GetVirtualServers(); len(vss) != 0 {
		t.Errorf("test virtual server left behind: %v", vss)
	}
	if err := CanUseIPVSProxier(ctx, fake, ipsettest.NewFake("v5.4"), ""); err == nil || !strings.Contains(err.Error(), "less than min required version") {
		t.Errorf("old ipset: %v", err)
	}
	if err := CanUseIPVSProxier(ctx, nil, ipsettest.NewFake("v7.17"), ""); err == nil {
		t.Error("nil ipvs accepted")
	}
}

func TestCleanupLeftovers(t *testing.T) {
	for _, f := range fams {
		t.Run(string(f.family), func(t *testing.T) {
			p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
			p.OnServiceAdd(lbService(f, nil))
			syncAll(t, p)
			_, ctx := ktesting.NewTestContext(t)
			ipts := []utiliptables.Interface{env.ipt}
			if failed := cleanupLeftovers(ctx, env.ipvs, ipts, env.ipset, env.netlink, nil); failed {
				t.Fatal("cleanup reported an error")
			}
			if got := virtualServers(t, env); len(got) != 0 {
				t.Errorf("virtual servers left: %v", got)
			}
			if sets, _ := env.ipset.ListSets(); len(sets) != 0 {
				t.Errorf("sets left: %v", sets)
			}
			if _, err := env.netlink.ListBindAddress(defaultDummyDevice); err == nil {
				t.Errorf("%s left", defaultDummyDevice)
			}
			d := env.dump(t)
			if strings.Contains(d, "KUBE-") {
				t.Errorf("chains left:\n%s", d)
			}
			// Nothing left is not an error (the fake, like upstream's, fails
			// to delete a missing interface, so give it one).
			nl := ipvstesting.NewFakeNetlinkHandle(f.ipv6)
			_, _ = nl.EnsureDummyDevice(defaultDummyDevice)
			if cleanupLeftovers(ctx, env.ipvs, ipts, env.ipset, nl, nil) {
				t.Error("second cleanup reported an error")
			}
		})
	}
}

func TestCleanupKeepsExcludedVirtualServers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	fake := ipvstest.NewFake()
	_ = fake.AddVirtualServer(&utilipvs.VirtualServer{Address: net.ParseIP("10.99.1.1"), Port: 80, Protocol: "TCP"})
	_ = fake.AddVirtualServer(&utilipvs.VirtualServer{Address: net.ParseIP("172.30.0.1"), Port: 80, Protocol: "TCP"})
	nl := ipvstesting.NewFakeNetlinkHandle(false)
	cleanupLeftovers(ctx, fake, nil, ipsettest.NewFake("v7.17"), nl, []string{"10.99.0.0/16"})
	if got := virtualServersOfFake(fake); !slices.Equal(got, []string{"10.99.1.1:80/TCP"}) {
		t.Errorf("virtual servers %v", got)
	}
}

func virtualServersOfFake(f *ipvstest.FakeIPVS) []string {
	vss, _ := f.GetVirtualServers()
	var out []string
	for _, vs := range vss {
		out = append(out, vs.String())
	}
	return out
}

// countingIPVS counts IPVS calls by method.
type countingIPVS struct {
	utilipvs.Interface
	calls map[string]int
}

func (c *countingIPVS) reset() { c.calls = map[string]int{} }
func (c *countingIPVS) count(m string) {
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[m]++
}
func (c *countingIPVS) total() int {
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}
func (c *countingIPVS) AddVirtualServer(vs *utilipvs.VirtualServer) error {
	c.count("AddVirtualServer")
	return c.Interface.AddVirtualServer(vs)
}
func (c *countingIPVS) UpdateVirtualServer(vs *utilipvs.VirtualServer) error {
	c.count("UpdateVirtualServer")
	return c.Interface.UpdateVirtualServer(vs)
}
func (c *countingIPVS) DeleteVirtualServer(vs *utilipvs.VirtualServer) error {
	c.count("DeleteVirtualServer")
	return c.Interface.DeleteVirtualServer(vs)
}
func (c *countingIPVS) GetVirtualServer(vs *utilipvs.VirtualServer) (*utilipvs.VirtualServer, error) {
	c.count("GetVirtualServer")
	return c.Interface.GetVirtualServer(vs)
}
func (c *countingIPVS) GetVirtualServers() ([]*utilipvs.VirtualServer, error) {
	c.count("GetVirtualServers")
	return c.Interface.GetVirtualServers()
}
func (c *countingIPVS) AddRealServer(vs *utilipvs.VirtualServer, rs *utilipvs.RealServer) error {
	c.count("AddRealServer")
	return c.Interface.AddRealServer(vs, rs)
}
func (c *countingIPVS) GetRealServers(vs *utilipvs.VirtualServer) ([]*utilipvs.RealServer, error) {
	c.count("GetRealServers")
	return c.Interface.GetRealServers(vs)
}
func (c *countingIPVS) DeleteRealServer(vs *utilipvs.VirtualServer, rs *utilipvs.RealServer) error {
	c.count("DeleteRealServer")
	return c.Interface.DeleteRealServer(vs, rs)
}
func (c *countingIPVS) UpdateRealServer(vs *utilipvs.VirtualServer, rs *utilipvs.RealServer) error {
	c.count("UpdateRealServer")
	return c.Interface.UpdateRealServer(vs, rs)
}

// A Service may use an address inside excludeCIDRs whose virtual server
// already exists: it is programmed like any other, and kept when the
// Service goes.
func TestServiceInsideExcludeCIDRs(t *testing.T) {
	f := fams[0]
	p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{excludeCIDRs: []string{f.svc(1) + "/32"}})
	if err := env.ipvs.AddVirtualServer(&utilipvs.VirtualServer{Address: net.ParseIP(f.svc(1)), Port: 80, Protocol: "TCP", Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
	web := webService(f, nil)
	p.OnServiceAdd(web)
	p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}))
	syncAll(t, p)
	vs := &utilipvs.VirtualServer{Address: net.ParseIP(f.svc(1)), Port: 80, Protocol: "TCP"}
	if got := realServersOf(t, env, vs); !slices.Equal(got, []string{f.hp(f.rpod(1), 8080)}) {
		t.Errorf("real servers %v", got)
	}
	p.OnServiceDelete(web)
	if err := p.SyncNow(); err != nil {
		t.Fatal(err)
	}
	if got := virtualServers(t, env); !slices.Equal(got, []string{f.svc(1) + ":80/TCP"}) {
		t.Errorf("virtual servers %v, want only the excluded one", got)
	}
}

// After a restart, real servers a previous kube-proxy left draining (weight
// 0) that are wanted again get their weight back.
func TestRestartRestoresWeights(t *testing.T) {
	f := fams[0]
	p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
	vs := &utilipvs.VirtualServer{Address: net.ParseIP(f.svc(1)), Port: 80, Protocol: "TCP", Scheduler: "rr"}
	if err := env.ipvs.AddVirtualServer(vs); err != nil {
		t.Fatal(err)
	}
	if err := env.ipvs.AddRealServer(vs, &utilipvs.RealServer{Address: net.ParseIP(f.rpod(1)), Port: 8080, Weight: 0}); err != nil {
		t.Fatal(err)
	}
	p.OnServiceAdd(st.NewService("ns", "web", func(s *v1.Service) {
		s.Spec.ClusterIP = f.svc(1)
		s.Spec.Ports = []v1.ServicePort{st.ServicePort("http", 80, v1.ProtocolTCP, 0)}
	}))
	p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}))
	syncAll(t, p)
	if got := weights(t, env, f.svc(1), 80, "TCP"); got[f.hp(f.rpod(1), 8080)] != 1 {
		t.Errorf("weights %v, want 1", got)
	}
}

// A new node address gets node port virtual servers at the next sync,
// without any Service change.
func TestNodeAddressChange(t *testing.T) {
	f := fams[0]
	p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
	p.OnServiceAdd(webService(f, nil))
	p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}))
	syncAll(t, p)
	if err := env.netlink.SetLocalAddresses("eth0", f.node, "192.168.7.7"); err != nil {
		t.Fatal(err)
	}
	if err := p.SyncNow(); err != nil {
		t.Fatal(err)
	}
	if got := virtualServers(t, env); !slices.Contains(got, "192.168.7.7:30080/TCP") {
		t.Errorf("no node port on the new address: %v", got)
	}
	if err := env.netlink.SetLocalAddresses("eth0", "192.168.7.7"); err != nil {
		t.Fatal(err)
	}
	if err := p.SyncNow(); err != nil {
		t.Fatal(err)
	}
	if got := virtualServers(t, env); slices.Contains(got, f.node+":30080/TCP") {
		t.Errorf("node port left on a removed address: %v", got)
	}
}

// Service ports nothing can be programmed for (as manifests may hold) are
// left out with a log line; the rest, and what was programmed before, stay.
func TestBadInput(t *testing.T) {
	f := fams[0]
	p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
	p.OnServiceAdd(webService(f, nil))
	p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}))
	syncAll(t, p)
	before := virtualServers(t, env)
	for i, tweak := range []func(*v1.Service){
		func(s *v1.Service) { s.Spec.Ports = []v1.ServicePort{st.ServicePort("p", 70000, v1.ProtocolTCP, 0)} },
		func(s *v1.Service) { s.Spec.Ports = []v1.ServicePort{st.ServicePort("p", 80, v1.Protocol("ICMP"), 0)} },
		func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports = []v1.ServicePort{st.ServicePort("p", 80, v1.ProtocolTCP, 99999)}
		},
	} {
		p.OnServiceAdd(st.NewService("bad", "svc"+itoa(i), func(s *v1.Service) {
			s.Spec.ClusterIP = f.svc(50 + i)
			tweak(s)
		}))
	}
	if err := p.SyncNow(); err != nil {
		t.Fatalf("sync with bad service ports: %v", err)
	}
	// The brain drops the bad ports, and the bad node port only: svc2
	// keeps its cluster IP.
	want := append(slices.Clone(before), f.svc(52)+":80/TCP")
	slices.Sort(want)
	if got := virtualServers(t, env); !slices.Equal(got, want) {
		t.Errorf("virtual servers %v, want %v", got, want)
	}
}

type failingRestorer struct {
	*ipsettest.FakeIPSet
	fail bool
}

func (f *failingRestorer) Restore(b *utilipset.Batch, ignoreExist bool) error {
	if f.fail {
		return errors.New("injected ipset restore failure")
	}
	return f.FakeIPSet.Restore(b, ignoreExist)
}

// A failed ipset restore fails the sync; the next (full) one converges.
func TestIPSetRestoreFailure(t *testing.T) {
	f := fams[0]
	p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
	fr := &failingRestorer{FakeIPSet: env.ipset}
	p.restorer = fr
	syncAll(t, p)
	fr.fail = true
	p.OnServiceAdd(webService(f, nil))
	p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, local(f.pod(1))))
	if err := p.SyncNow(); err == nil {
		t.Fatal("sync with a failing ipset restore succeeded")
	}
	fr.fail = false
	if err := p.SyncNow(); err != nil {
		t.Fatal(err)
	}
	fresh, freshEnv := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
	fresh.OnServiceAdd(webService(f, nil))
	fresh.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, local(f.pod(1))))
	syncAll(t, fresh)
	if diff := cmp.Diff(freshEnv.dump(t), env.dump(t)); diff != "" {
		t.Errorf("after recovering (-fresh +recovered):\n%s", diff)
	}
}

type failingIPVS struct {
	utilipvs.Interface
	failAddRS bool
}

func (f *failingIPVS) AddRealServer(vs *utilipvs.VirtualServer, rs *utilipvs.RealServer) error {
	if f.failAddRS {
		return errors.New("injected AddRealServer failure")
	}
	return f.Interface.AddRealServer(vs, rs)
}

// A real server the kernel refuses does not fail the sync (as upstream:
// the rest is programmed, healthz stays green); the next sync is full and
// adds it.
func TestIPVSErrorRetried(t *testing.T) {
	f := fams[0]
	p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
	fi := &failingIPVS{Interface: env.ipvs, failAddRS: true}
	p.ipvs, p.gtm.ipvs = fi, fi
	p.OnServiceAdd(webService(f, nil))
	p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}))
	syncAll(t, p)
	if got := virtualServers(t, env); len(got) != 2 {
		t.Fatalf("virtual servers %v, want the cluster IP and node port ones", got)
	}
	vs := &utilipvs.VirtualServer{Address: net.ParseIP(f.svc(1)), Port: 80, Protocol: "TCP"}
	if got := realServersOf(t, env, vs); len(got) != 0 {
		t.Fatalf("real servers %v despite the failure", got)
	}
	fi.failAddRS = false
	if err := p.SyncNow(); err != nil {
		t.Fatal(err)
	}
	if got := realServersOf(t, env, vs); !slices.Equal(got, []string{f.hp(f.rpod(1), 8080)}) {
		t.Errorf("real servers after the retry: %v", got)
	}
}

// A full sync puts back what was changed behind the proxier's back, also
// where the kernel then looks as it did at an earlier sync.
func TestFullSyncRepairsKernelDrift(t *testing.T) {
	f := fams[0]
	vs := func(i int) *utilipvs.VirtualServer {
		return &utilipvs.VirtualServer{Address: net.ParseIP(f.svc(i)), Port: 80, Protocol: "TCP", Scheduler: "rr"}
	}
	rs := func(i, weight int) *utilipvs.RealServer {
		return &utilipvs.RealServer{Address: net.ParseIP(f.rpod(i)), Port: 8080, Weight: weight}
	}
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		// before is the kernel state a previous kube-proxy left.
		before  func(t *testing.T, env *fakeEnv)
		disturb func(t *testing.T, env *fakeEnv)
		// pods are the endpoints' rpod numbers (default 1 and 2).
		pods []int
		// disturbFirst disturbs the kernel right after the first sync,
		// not after a second, undisturbed, full sync.
		disturbFirst bool
	}{
		{name: "nothing"},
		{name: "real server deleted", disturb: func(t *testing.T, env *fakeEnv) { must(t, env.ipvs.DeleteRealServer(vs(1), rs(1, 1))) }},
		{name: "real server added", disturb: func(t *testing.T, env *fakeEnv) { must(t, env.ipvs.AddRealServer(vs(1), rs(9, 1))) }},
		{name: "real server weight changed", disturb: func(t *testing.T, env *fakeEnv) { must(t, env.ipvs.UpdateRealServer(vs(1), rs(2, 0))) }},
		{name: "real servers swapped", disturb: func(t *testing.T, env *fakeEnv) {
			must(t, env.ipvs.DeleteRealServer(vs(1), rs(2, 1)))
			must(t, env.ipvs.AddRealServer(vs(1), rs(9, 1)))
		}},
		{name: "virtual server deleted", disturb: func(t *testing.T, env *fakeEnv) { must(t, env.ipvs.DeleteVirtualServer(vs(1))) }},
		{name: "virtual server added", disturb: func(t *testing.T, env *fakeEnv) { must(t, env.ipvs.AddVirtualServer(vs(9))) }},
		{name: "virtual server changed", disturb: func(t *testing.T, env *fakeEnv) {
			v := vs(1)
			v.Scheduler = "wrr"
			must(t, env.ipvs.UpdateVirtualServer(v))
		}},
		{name: "set entry deleted", disturb: func(t *testing.T, env *fakeEnv) {
			must(t, env.ipset.DelEntry(f.svc(1)+",tcp:80", kubeClusterIPSet))
		}},
		{name: "set entry added", disturb: func(t *testing.T, env *fakeEnv) {
			must(t, env.ipset.AddEntry(f.svc(9)+",tcp:80", &utilipset.IPSet{Name: kubeClusterIPSet, SetType: utilipset.HashIPPort}, true))
		}},
		{
			// The first sync gives the real server its weight back; the
			// kernel is then put back as that sync first listed it.
			name: "weight restored at restart, then reset",
			before: func(t *testing.T, env *fakeEnv) {
				must(t, env.ipvs.AddVirtualServer(vs(1)))
				must(t, env.ipvs.AddRealServer(vs(1), rs(1, 0)))
			},
			disturb:      func(t *testing.T, env *fakeEnv) { must(t, env.ipvs.UpdateRealServer(vs(1), rs(1, 0))) },
			pods:         []int{1},
			disturbFirst: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
			if tc.before != nil {
				tc.before(t, env)
			}
			pods := tc.pods
			if pods == nil {
				pods = []int{1, 2}
			}
			var eps []st.EP
			for _, i := range pods {
				eps = append(eps, st.EP{IP: f.rpod(i)})
			}
			p.OnServiceAdd(webService(f, nil))
			p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, eps...))
			syncAll(t, p)
			want := env.dump(t)
			if !tc.disturbFirst {
				// A full sync of an undisturbed kernel, so that the
				// disturbance is made to a view the proxier has already
				// compared with the kernel once.
				p.RequestFullSync()
				if err := p.SyncNow(); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, env.dump(t)); diff != "" {
					t.Fatalf("a full sync of an undisturbed kernel changed it (-want +got):\n%s", diff)
				}
			}
			if tc.disturb != nil {
				tc.disturb(t, env)
			}
			p.RequestFullSync()
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, env.dump(t)); diff != "" {
				t.Errorf("state not restored (-want +got):\n%s", diff)
			}
		})
	}
}
