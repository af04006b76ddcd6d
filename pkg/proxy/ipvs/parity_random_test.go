//go:build linux

package ipvs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	proxyutiltest "k8s.io/kube-proxy/pkg/proxy/util/testing"
	utilipset "k8s.io/net-utils/ipset"
	ipsettest "k8s.io/net-utils/ipset/testing"
	iptablestest "k8s.io/net-utils/iptables/testing"
	utilipvs "k8s.io/net-utils/ipvs"
	ipvstest "k8s.io/net-utils/ipvs/testing"
	sysctltest "k8s.io/net-utils/sysctl/testing"
)

// TestUpstreamParityRandom feeds every scenario in
// testdata/upstream-v1.37.2-random (made by parity_gen_test.go) to our
// proxier, step by step, and requires the state after each step's sync to be
// exactly what upstream v1.37.2's ipvs proxier left in its fakes for the
// same step (<name>.<step>.upstream.txt, captured as UPSTREAM-CAPTURE.md
// describes): virtual servers with their scheduler, flags, timeout and real
// servers with weights, every ipset with its entries, the addresses on
// kube-ipvs0, the sysctls set and the nat and filter rules. Steps after the
// first are partial syncs on our side (upstream always syncs everything),
// and some give real servers connections before their endpoint goes, so
// graceful termination is compared too.
func TestUpstreamParityRandom(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(parityDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no scenarios in %s", parityDir)
	}
	compared := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var sc parityScenario
		if err := json.Unmarshal(raw, &sc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		t.Run(sc.Name, func(t *testing.T) {
			compared += runParityScenario(t, &sc, func(step int) string {
				want, err := os.ReadFile(filepath.Join(parityDir, fmt.Sprintf("%s.%d.upstream.txt", sc.Name, step)))
				if err != nil {
					t.Fatalf("step %d: upstream capture missing (see testdata/UPSTREAM-CAPTURE.md): %v", step, err)
				}
				return string(want)
			})
		})
	}
	// Every capture must have been compared: a capture without its
	// scenario step would otherwise go unnoticed.
	captures, _ := filepath.Glob(filepath.Join(parityDir, "*.upstream.txt"))
	if !t.Failed() && compared != len(captures) {
		t.Errorf("compared %d steps, testdata holds %d upstream captures", compared, len(captures))
	}
}

// runParityScenario drives a fake proxier through sc and compares its
// state after each step with want(step). It returns the steps compared.
func runParityScenario(t *testing.T, sc *parityScenario, want func(step int) string) int {
	if sc.DualStack {
		return runDualStackParityScenario(t, sc, want)
	}
	if sc.NodeName != testHostname {
		t.Fatalf("scenario node %q, but newFakeProxier's node is %q", sc.NodeName, testHostname)
	}
	if sc.Config.MasqueradeBit != 14 {
		t.Fatalf("scenario masquerade bit %d, but newFakeProxier's is 14", sc.Config.MasqueradeBit)
	}
	ifaces := map[string][]net.IP{}
	for dev, cidrs := range sc.Interfaces {
		for _, c := range cidrs {
			ip, _, err := net.ParseCIDR(c)
			if err != nil {
				t.Fatalf("interface %s address %q: %v", dev, c, err)
			}
			ifaces[dev] = append(ifaces[dev], ip)
		}
	}
	if len(ifaces["eth0"]) == 0 || ifaces["eth0"][0].String() != sc.NodeIP {
		t.Fatalf("the node IP %s must be eth0's first address (newFakeProxier makes it so), eth0 has %v", sc.NodeIP, ifaces["eth0"])
	}
	var eth0 []string
	for _, ip := range ifaces["eth0"] {
		eth0 = append(eth0, ip.String())
	}
	syncs := &paritySyncs{}
	p, env := newFakeProxier(t, sc.Family, eth0, fakeProxierOptions{
		onSync:            syncs.record,
		masqueradeAll:     sc.Config.MasqueradeAll,
		scheduler:         sc.Config.Scheduler,
		strictARP:         sc.Config.StrictARP,
		nodePortAddresses: sc.Config.NodePortAddresses,
		localDetectorCIDR: sc.Config.ClusterCIDR,
		excludeCIDRs:      sc.Config.ExcludeCIDRs,
	})
	for _, dev := range paritySortedKeys(ifaces) {
		if dev == "eth0" {
			continue
		}
		var ips []string
		var addrs []net.Addr
		for _, ip := range ifaces[dev] {
			ips = append(ips, ip.String())
			bits := 8 * len(ip.To16())
			if ip.To4() != nil {
				bits = 32
			}
			addrs = append(addrs, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
		}
		if err := env.netlink.SetLocalAddresses(dev, ips...); err != nil {
			t.Fatal(err)
		}
		env.network.AddInterfaceAddr(&net.Interface{Name: dev}, addrs)
	}

	if sc.InitialState != nil {
		parityApplyInitialState(t, env, sc.InitialState)
	}
	if sc.NodeLabels != nil {
		p.OnTopologyChange(sc.NodeLabels)
	}

	svcs := map[string]*v1.Service{}
	eps := map[string]*discovery.EndpointSlice{}
	compared := 0
	for i, st := range sc.Steps {
		for _, s := range st.Services {
			if old, ok := svcs[parityServiceKey(s)]; ok {
				p.OnServiceUpdate(old, s)
			} else {
				p.OnServiceAdd(s)
			}
			svcs[parityServiceKey(s)] = s
		}
		for _, s := range st.Slices {
			if old, ok := eps[paritySliceKey(s)]; ok {
				p.OnEndpointSliceUpdate(old, s)
			} else {
				p.OnEndpointSliceAdd(s)
			}
			eps[paritySliceKey(s)] = s
		}
		for _, k := range st.DeleteServices {
			p.OnServiceDelete(svcs[k])
			delete(svcs, k)
		}
		for _, k := range st.DeleteSlices {
			p.OnEndpointSliceDelete(eps[k])
			delete(eps, k)
		}
		for _, ac := range st.ActiveConns {
			if !paritySetActiveConn(env, ac) {
				t.Fatalf("step %d: no real server %s of %s to give connections (upstream had it)", i, ac.RealServer, ac.VirtualServer)
			}
		}
		syncs.once(t, i, p)
		if st.NoCapture {
			continue
		}
		got, exp := parityDumpEnv(t, env), want(i)
		if got != exp {
			t.Errorf("step %d: state differs from upstream v1.37.2's (- upstream only, + ours only):\n%s", i, parityLineDiff(exp, got))
		}
		compared++
	}
	return compared
}

// runDualStackParityScenario runs an IPv4 and an IPv6 proxier on one node,
// as NewDualStackProxier and the metaproxier do: one ipvs table, one set of
// ipsets, one kube-ipvs0 (parityNetlink gives each family its view), an
// iptables fake per family. Slices go to the proxier of their address type,
// everything else to both, IPv4 first, as upstream's capture does.
func runDualStackParityScenario(t *testing.T, sc *parityScenario, want func(step int) string) int {
	if sc.InitialState != nil || sc.NodeLabels != nil {
		t.Fatal("dual-stack scenarios with an initial state or node labels are not supported")
	}
	_, ctx := ktesting.NewTestContext(t)
	fipvs := ipvstest.NewFake()
	fipset := ipsettest.NewFake("v7.17")
	sysctl := sysctltest.NewFake()
	links := &parityNodeLinks{addrs: map[string][]string{}}
	network := proxyutiltest.NewFakeNetwork()
	for _, dev := range paritySortedKeys(sc.Interfaces) {
		var addrs []net.Addr
		links.addrs[dev] = []string{}
		for _, c := range sc.Interfaces[dev] {
			ip, ipnet, err := net.ParseCIDR(c)
			if err != nil {
				t.Fatalf("interface %s address %q: %v", dev, c, err)
			}
			links.addrs[dev] = append(links.addrs[dev], ip.String())
			addrs = append(addrs, &net.IPNet{IP: ip, Mask: ipnet.Mask})
		}
		network.AddInterfaceAddr(&net.Interface{Name: dev}, addrs)
	}
	families := []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	ipts := map[v1.IPFamily]*iptablestest.FakeIPTables{v1.IPv4Protocol: iptablestest.NewFake(), v1.IPv6Protocol: iptablestest.NewIPv6Fake()}
	ps := map[v1.IPFamily]*Proxier{}
	syncs := map[v1.IPFamily]*paritySyncs{}
	for _, fam := range families {
		syncs[fam] = &paritySyncs{}
		cfg := &kubeproxyconfig.KubeProxyConfiguration{}
		cfg.IPTables.MasqueradeBit = ptr.To(sc.Config.MasqueradeBit)
		cfg.Linux.MasqueradeAll = sc.Config.MasqueradeAll
		cfg.IPVS.Scheduler = sc.Config.Scheduler
		cfg.IPVS.StrictARP = sc.Config.StrictARP
		cfg.NodePortAddresses = sc.Config.NodePortAddresses
		cfg.IPVS.ExcludeCIDRs = sc.Config.ExcludeCIDRs
		cfg.SyncPeriod = metav1.Duration{Duration: 30 * time.Second}
		cidr, nodeIP := sc.Config.ClusterCIDR, sc.NodeIP
		if fam == v1.IPv6Protocol {
			cidr, nodeIP = sc.Config.ClusterCIDR6, sc.NodeIP6
		}
		var det proxyutil.LocalTrafficDetector = proxyutil.NewNoOpLocalDetector()
		if cidr != "" {
			det = proxyutil.NewDetectLocalByCIDR(cidr)
		}
		p, err := NewProxierWithOptions(ctx, cfg, fam, ipts[fam], fipvs, fipset, sysctl, det, sc.NodeName, net.ParseIP(nodeIP), nil, nil, false, withDeps(deps{
			netlink:        parityNetlink{links: links, isIPv6: fam == v1.IPv6Protocol},
			conntrack:      conntrack.NewFake(),
			kernelVersion:  func() (*version.Version, error) { return version.ParseGeneric("5.15") },
			clock:          testingclock.NewFakeClock(time.Unix(1_700_000_000, 0)),
			noGracefulLoop: true,
			HostOptions: syncshell.HostOptions{
				ServiceHealthServer: healthcheck.NewFakeServiceHealthServer(),
				NetworkInterfacer:   network,
				SyncHook:            syncs[fam].record,
			},
		}))
		if err != nil {
			t.Fatalf("NewProxierWithOptions(%s): %v", fam, err)
		}
		ps[fam] = p
	}
	sliceProxier := func(s *discovery.EndpointSlice) *Proxier {
		if s.AddressType == discovery.AddressTypeIPv6 {
			return ps[v1.IPv6Protocol]
		}
		return ps[v1.IPv4Protocol]
	}
	env := &fakeEnv{ipvs: fipvs}

	svcs := map[string]*v1.Service{}
	eps := map[string]*discovery.EndpointSlice{}
	compared := 0
	for i, st := range sc.Steps {
		for _, s := range st.Services {
			for _, fam := range families {
				if old, ok := svcs[parityServiceKey(s)]; ok {
					ps[fam].OnServiceUpdate(old, s)
				} else {
					ps[fam].OnServiceAdd(s)
				}
			}
			svcs[parityServiceKey(s)] = s
		}
		for _, s := range st.Slices {
			if old, ok := eps[paritySliceKey(s)]; ok {
				sliceProxier(s).OnEndpointSliceUpdate(old, s)
			} else {
				sliceProxier(s).OnEndpointSliceAdd(s)
			}
			eps[paritySliceKey(s)] = s
		}
		for _, k := range st.DeleteServices {
			if svcs[k] == nil {
				t.Fatalf("step %d deletes unknown service %s", i, k)
			}
			for _, fam := range families {
				ps[fam].OnServiceDelete(svcs[k])
			}
			delete(svcs, k)
		}
		for _, k := range st.DeleteSlices {
			if eps[k] == nil {
				t.Fatalf("step %d deletes unknown slice %s", i, k)
			}
			sliceProxier(eps[k]).OnEndpointSliceDelete(eps[k])
			delete(eps, k)
		}
		for _, ac := range st.ActiveConns {
			if !paritySetActiveConn(env, ac) {
				t.Fatalf("step %d: no real server %s of %s to give connections (upstream had it)", i, ac.RealServer, ac.VirtualServer)
			}
		}
		for _, fam := range families {
			syncs[fam].once(t, i, ps[fam])
		}
		if st.NoCapture {
			continue
		}
		got := parityState(t, fipvs, fipset, sysctl, ipts[v1.IPv4Protocol])
		links.mu.Lock()
		bound, ok := links.addrs[defaultDummyDevice]
		got.DummyExists, got.Bound = ok, slices.Clone(bound)
		links.mu.Unlock()
		var buf bytes.Buffer
		if err := ipts[v1.IPv6Protocol].SaveInto("", &buf); err != nil {
			t.Fatal(err)
		}
		got.IP6TablesSave = buf.String()
		if exp := want(i); parityFormat(got) != exp {
			t.Errorf("step %d: state differs from upstream v1.37.2's (- upstream only, + ours only):\n%s", i, parityLineDiff(exp, parityFormat(got)))
		}
		compared++
	}
	return compared
}

// paritySyncs counts a proxier's syncs, so that each step is compared after
// exactly one, as upstream's was.
type paritySyncs struct {
	mu     sync.Mutex
	n      int
	failed []error
}

func (s *paritySyncs) record(r syncshell.SyncResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if r.Err != nil {
		s.failed = append(s.failed, r.Err)
	}
}

func (s *paritySyncs) count() (int, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, slices.Clone(s.failed)
}

// once runs step i's one sync: for the first step, marking both informers
// synced (which syncs at once, as upstream's does) or, should that only
// queue a sync, SyncNow; afterwards SyncNow. The step's handler calls must
// not have synced by themselves.
func (s *paritySyncs) once(t *testing.T, i int, p *Proxier) {
	t.Helper()
	before, _ := s.count()
	if before != i {
		t.Fatalf("step %d: %d syncs before it, want %d (a handler synced by itself)", i, before, i)
	}
	if i == 0 {
		p.OnServiceSynced()
		p.OnEndpointSlicesSynced()
	}
	if n, _ := s.count(); n == before {
		if err := p.SyncNow(); err != nil {
			t.Fatalf("step %d: sync: %v", i, err)
		}
	}
	n, failed := s.count()
	if n != i+1 || len(failed) > 0 {
		t.Fatalf("step %d: %d syncs, want %d; failures: %v", i, n, i+1, failed)
	}
}

// parityApplyInitialState puts what an earlier kube-proxy left into the
// fakes, as upstream's capture does into its own.
func parityApplyInitialState(t *testing.T, env *fakeEnv, is *parityInitialState) {
	t.Helper()
	for _, v := range is.VirtualServers {
		vs := &utilipvs.VirtualServer{Address: net.ParseIP(v.Address), Port: uint16(v.Port), Protocol: v.Protocol,
			Scheduler: v.Scheduler, Flags: utilipvs.ServiceFlags(v.Flags), Timeout: v.Timeout}
		if err := env.ipvs.AddVirtualServer(vs); err != nil {
			t.Fatal(err)
		}
		for _, r := range v.RealServers {
			rs := &utilipvs.RealServer{Address: net.ParseIP(r.Address), Port: uint16(r.Port), Weight: r.Weight, ActiveConn: r.ActiveConn}
			if err := env.ipvs.AddRealServer(vs, rs); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(is.Bound) > 0 {
		if _, err := env.netlink.EnsureDummyDevice(defaultDummyDevice); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range is.Bound {
		if _, err := env.netlink.EnsureAddressBind(a, defaultDummyDevice); err != nil {
			t.Fatal(err)
		}
	}
	for _, set := range is.IPSets {
		spec := &utilipset.IPSet{Name: set.Name, SetType: utilipset.Type(set.Type), HashFamily: set.Family}
		if err := env.ipset.CreateSet(spec, true); err != nil {
			t.Fatal(err)
		}
		for _, e := range set.Entries {
			if err := env.ipset.AddEntry(e, spec, true); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func paritySetActiveConn(env *fakeEnv, ac parityActiveConn) bool {
	found := false
	for key, dests := range env.ipvs.Destinations {
		if net.JoinHostPort(key.IP, strconv.Itoa(int(key.Port)))+"/"+strings.ToUpper(key.Protocol) != ac.VirtualServer {
			continue
		}
		for _, d := range dests {
			if d.String() == ac.RealServer {
				d.ActiveConn = ac.ActiveConn
				found = true
			}
		}
	}
	return found
}

// parityDumpEnv reads our fakes into the canonical dump.
func parityDumpEnv(t *testing.T, env *fakeEnv) string {
	t.Helper()
	st := parityState(t, env.ipvs, env.ipset, env.sysctl, env.ipt)
	if bound, err := env.netlink.ListBindAddress(defaultDummyDevice); err == nil {
		st.DummyExists = true
		st.Bound = bound
	}
	return parityFormat(st)
}

// parityState reads everything but kube-ipvs0 from our fakes.
func parityState(t *testing.T, fipvs *ipvstest.FakeIPVS, fipset *ipsettest.FakeIPSet, sysctl *sysctltest.Fake, ipt *iptablestest.FakeIPTables) parityDumpState {
	t.Helper()
	var st parityDumpState
	for key, vs := range fipvs.Services {
		d := parityDumpVS{Protocol: vs.Protocol, Address: vs.Address.String(), Port: int(vs.Port),
			Scheduler: vs.Scheduler, Flags: uint32(vs.Flags), Timeout: vs.Timeout}
		for _, rs := range fipvs.Destinations[key] {
			d.RealServers = append(d.RealServers, parityDumpRS{Address: rs.Address.String(), Port: int(rs.Port), Weight: rs.Weight})
		}
		st.VirtualServers = append(st.VirtualServers, d)
	}
	for name, set := range fipset.Sets {
		// net-utils' fake keeps the spec with ipset's defaults filled in.
		st.Sets = append(st.Sets, parityDumpSet{Name: name, Type: string(set.SetType), Family: set.HashFamily,
			HashSize: set.HashSize, MaxElem: set.MaxElem, PortRange: set.PortRange,
			Entries: fipset.Entries[name].UnsortedList()})
	}
	st.Sysctls = sysctl.Snapshot()
	var buf bytes.Buffer
	if err := ipt.SaveInto("", &buf); err != nil {
		t.Fatal(err)
	}
	st.IPTablesSave = buf.String()
	return st
}

// parityLineDiff is a minimal line diff (longest common subsequence) with
// two lines of context around each change.
func parityLineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var out []line
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			out = append(out, line{' ', x[i]})
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			out = append(out, line{'+', y[j]})
			j++
		default:
			out = append(out, line{'-', x[i]})
			i++
		}
	}
	var sb strings.Builder
	last := -1
	for k, l := range out {
		if l.op == ' ' {
			continue
		}
		from := max(k-2, last+1)
		if last >= 0 && from > last+1 {
			sb.WriteString("...\n")
		}
		for c := from; c < k; c++ {
			if out[c].op == ' ' {
				fmt.Fprintf(&sb, "  %s\n", out[c].text)
			}
		}
		fmt.Fprintf(&sb, "%c %s\n", l.op, l.text)
		last = k
		for c := k + 1; c < len(out) && c <= k+2 && out[c].op == ' '; c++ {
			fmt.Fprintf(&sb, "  %s\n", out[c].text)
			last = c
		}
	}
	return sb.String()
}
