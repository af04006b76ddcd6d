//go:build linux

package iptables

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2/ktesting"

	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	conntracktest "k8s.io/net-utils/conntrack/testing"
	utiliptables "k8s.io/net-utils/iptables"
	sysctltest "k8s.io/net-utils/sysctl/testing"
)

// kernelNetns creates a private network namespace named for the test and
// puts wrapper scripts first in PATH so that every iptables binary the real
// utiliptables implementation runs executes inside it, with the given
// variant ("nft" or "legacy"). The host namespace is never touched.
func kernelNetns(t testing.TB, variant string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kernel test needs root (creates a network namespace and loads iptables rules)")
	}
	for _, bin := range []string{"ip", "iptables-" + variant, "ip6tables-" + variant, "iptables-" + variant + "-save", "iptables-" + variant + "-restore"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("kernel test needs %s: %v", bin, err)
		}
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	ns := "kp-ipt-" + hex.EncodeToString(rnd[:])
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("cannot create network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("deleting netns %s: %v: %s", ns, err, out)
		}
	})
	// Loopback up, so the namespace behaves like a node's.
	_ = exec.Command("ip", "-n", ns, "link", "set", "lo", "up").Run()

	dir := t.TempDir()
	for _, fam := range []string{"iptables", "ip6tables"} {
		for _, suffix := range []string{"", "-save", "-restore"} {
			script := fmt.Sprintf("#!/bin/sh\nexec ip netns exec %s %s-%s%s \"$@\"\n", ns, fam, variant, suffix)
			if err := os.WriteFile(filepath.Join(dir, fam+suffix), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s, ok := t.(interface{ Setenv(string, string) }); ok {
		s.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	} else {
		t.Fatal("cannot set PATH")
	}
	return ns
}

// kernelIPTables creates a private namespace (kernelNetns) and returns the
// real iptables of f's family and the variant there, and the namespace's
// name, skipping the test if that iptables cannot be used.
func kernelIPTables(t *testing.T, variant string, f fam) (utiliptables.Interface, string) {
	t.Helper()
	ns := kernelNetns(t, variant)
	proto := utiliptables.ProtocolIPv4
	if f.family == v1.IPv6Protocol {
		proto = utiliptables.ProtocolIPv6
	}
	real := utiliptables.New(proto)
	if err := real.Present(); err != nil {
		t.Skipf("%s iptables not usable here: %v", variant, err)
	}
	return &netnsIPTables{Interface: real, ns: ns}, ns
}

// netnsIPTables is the real Interface whose binaries kernelNetns runs in
// the test's namespace, with the nf_tables generation read there too (the
// real one reads the calling process's namespace, the host's).
type netnsIPTables struct {
	utiliptables.Interface
	ns string
}

func (n *netnsIPTables) Features() utiliptables.Features {
	return n.Interface.(utiliptables.FeatureDetector).Features()
}

func (n *netnsIPTables) Generation() (gen uint32, ok bool, err error) {
	if n.Features().Variant != utiliptables.VariantNFT {
		return 0, false, nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread enters the namespace and is never unlocked: it ends
		// with the goroutine instead of running others there.
		runtime.LockOSThread()
		f, e := os.Open(filepath.Join("/var/run/netns", n.ns))
		if e != nil {
			err = e
			return
		}
		defer f.Close()
		if err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			return
		}
		gen, err = utiliptables.NFTablesGeneration()
	}()
	<-done
	return gen, err == nil, err
}

// corruptingIPTables passes everything through, except that while bad is
// set it appends an invalid rule to every restore.
type corruptingIPTables struct {
	utiliptables.Interface
	bad  bool
	last []byte // the last restore input, as given
}

func (c *corruptingIPTables) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	c.last = slices.Clone(data)
	if c.bad {
		i := bytes.LastIndex(data, []byte("COMMIT\n"))
		bad := append(slices.Clone(data[:i]), "-A KUBE-SERVICES -j KUBE-NO-SUCH-CHAIN\n"...)
		data = append(bad, data[i:]...)
	}
	return c.Interface.RestoreAll(data, flush, counters)
}

func kernelProxier(t testing.TB, f fam, ipt utiliptables.Interface) *testEnv {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	cfg := newTestConfig(envConfig{})
	det := proxyutil.NewDetectLocalByCIDR(f.clusterCIDR)
	env := &testEnv{f: f, sysctl: sysctltest.NewFake(), ct: conntracktest.NewFake(), hc: &recordingHealthServer{}, ctx: ctx}
	p, err := NewProxierWithOptions(ctx, cfg, f.family, ipt, env.sysctl, det, testNodeName, net.ParseIP(f.node), nil, nil, false,
		proxieropts.WithConntrack(env.ct), WithNFAcct(nil), proxieropts.WithServiceHealthServer(env.hc), proxieropts.WithNetworkInterfacer(testNetwork(f)), WithoutMonitor())
	if err != nil {
		t.Fatal(err)
	}
	env.p = p
	return env
}

func save(t testing.TB, ipt utiliptables.Interface) string {
	t.Helper()
	var b bytes.Buffer
	for _, table := range []utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
		if err := ipt.SaveInto(table, &b); err != nil {
			t.Fatalf("iptables-save %s: %v", table, err)
		}
	}
	return b.String()
}

var counterRE = regexp.MustCompile(`\[\d+:\d+\]`)
var saveCommentRE = regexp.MustCompile(`(?m)^#.*\n`)

// normalizeSave drops what changes between two saves of the same rules.
func normalizeSave(s string) string {
	return saveCommentRE.ReplaceAllString(counterRE.ReplaceAllString(s, "[0:0]"), "")
}

// eachBackend runs body as a subtest for each iptables backend and IP
// family; kernel tests skip, in kernelIPTables, where one is unusable.
func eachBackend(t *testing.T, body func(t *testing.T, variant string, f fam)) {
	for _, variant := range []string{"nft", "legacy"} {
		for _, f := range families {
			t.Run(variant+"/"+string(f.family), func(t *testing.T) { body(t, variant, f) })
		}
	}
}

func TestKernel(t *testing.T) {
	eachBackend(t, func(t *testing.T, variant string, f fam) {
		real, _ := kernelIPTables(t, variant, f)
		ipt := &corruptingIPTables{Interface: real}
		env := kernelProxier(t, f, ipt)

		sc := representativeCluster(f)
		more, moreSlices := manyServices(f, 40, 4)
		for _, s := range append(sc.services, more...) {
			env.p.OnServiceAdd(s)
		}
		for _, s := range append(sc.slices, moreSlices...) {
			env.p.OnEndpointSliceAdd(s)
		}
		env.p.OnServiceSynced()
		env.p.OnEndpointSlicesSynced()
		if !env.p.Initialized() || env.p.NeedsFullSync() {
			t.Fatalf("first sync against the kernel failed")
		}

		// The kernel's own view, traced: the rules mean what the
		// behaviour tests say, after the kernel parsed them.
		checkTraces := func(stage string, wantSvc0 int) {
			t.Helper()
			text := save(t, real)
			for _, c := range []string{"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-FORWARD", "KUBE-PROXY-FIREWALL", "KUBE-EXTERNAL-SERVICES"} {
				if !strings.Contains(text, ":"+c+" ") {
					t.Errorf("%s: iptables-save lacks chain %s", stage, c)
				}
			}
			rs, err := parseRuleset(text)
			if err != nil {
				t.Fatalf("%s: parsing iptables-save: %v\n%s", stage, err, text)
			}
			tr := newTracer(rs, f.node, f.node2)
			expect := func(name string, pk packet, want int, verdict string) {
				t.Helper()
				outs, err := tr.trace(pk)
				if err != nil {
					t.Fatalf("%s: %s: %v", stage, name, err)
				}
				if len(outs) != want || outs[0].verdict != verdict {
					t.Errorf("%s: %s: got %v, want %d outcomes with %s", stage, name, summary(outs), want, verdict)
				}
			}
			expect("cluster IP", f.fromPod(f.pod(9), f.svc(1), 80), 2, "ACCEPT")
			expect("LB, eTP Local", f.fromExt(f.lb, 443), 1, "ACCEPT")
			expect("LB from disallowed source", packet{from: fromExternal, iif: "eth0", src: f.otherNode, dst: f.lb, proto: "tcp", dport: 443}, 1, "DROP")
			expect("no endpoints", withProto(f.fromPod(f.pod(9), f.svc(3), 8080), "udp"), 1, "REJECT")
			expect("iTP Local without local endpoints", withProto(f.fromPod(f.pod(9), f.svc(4), 53), "udp"), 1, "DROP")
			expect("generated service 0", f.fromPod(f.pod(9), f.svcIndex(0), 80), wantSvc0, "ACCEPT")
		}
		checkTraces("full sync", 4)

		// Partial sync: one endpoint fewer for generated service 0.
		updateSlice(env.p, moreSlices, 0, func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[:3] })
		if err := env.p.SyncNow(); err != nil {
			t.Fatalf("partial sync: %v", err)
		}
		// The kernel kept the top-level chains the restore left out.
		if nat, filter := writesTopLevel(string(ipt.last)); len(nat) != 0 || filter {
			t.Errorf("endpoint-only partial sync wrote top-level nat chains %v, filter %v:\n%s", nat, filter, ipt.last)
		}
		checkTraces("partial sync", 3)
		goneSEP := string(endpointChainName("ns/svc0:p80", "tcp", f.hp(f.podIndex(3), 8080)))
		if strings.Contains(save(t, real), goneSEP) {
			t.Errorf("partial sync left stale chain %s", goneSEP)
		}

		// A restore the kernel rejects changes nothing, bumps the
		// failure metric, and the next sync repairs.
		before := normalizeSave(save(t, real))
		failures := restoreFailures(t, f.family)
		ipt.bad = true
		updateSlice(env.p, moreSlices, 0, func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[:2] })
		err := env.p.SyncNow()
		if !errors.Is(err, errSyncFailed) {
			t.Fatalf("sync with a bad rule: got %v, want failure", err)
		}
		if got := restoreFailures(t, f.family); got != failures+1 {
			t.Errorf("restore failure metric = %v, want %v", got, failures+1)
		}
		if after := normalizeSave(save(t, real)); after != before {
			t.Errorf("failed restore changed the kernel's rules:\n%s", lineDiff(before, after))
		}
		ipt.bad = false
		if err := env.p.SyncNow(); err != nil {
			t.Fatalf("repair sync: %v", err)
		}
		checkTraces("repair", 2)

		// Cleanup removes everything of ours (kubelet's KUBE-FIREWALL stays).
		_, ctx := ktesting.NewTestContext(t)
		if cleanupLeftoversForFamily(ctx, real) {
			t.Errorf("cleanup reported errors")
		}
		left := save(t, real)
		for _, l := range strings.Split(left, "\n") {
			if strings.Contains(l, "KUBE-") && !strings.Contains(l, "KUBE-FIREWALL") {
				t.Errorf("cleanup left: %s", l)
			}
		}
		if t.Failed() {
			t.Logf("final iptables-save:\n%s", left)
		}
	})
}
