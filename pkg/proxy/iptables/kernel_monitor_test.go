//go:build linux

package iptables

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	utiliptables "k8s.io/net-utils/iptables"
	sysctltest "k8s.io/net-utils/sysctl/testing"
)

// monitorWaiter lets a test wait until the canary Monitor goroutine the
// proxier started has returned: it must not outlive the test's network
// namespace and PATH wrappers, or it would run iptables on the host.
type monitorWaiter struct {
	utiliptables.Interface
	done chan struct{}
}

func (m *monitorWaiter) Monitor(canary utiliptables.Chain, tables []utiliptables.Table, reload func(), interval time.Duration, stop <-chan struct{}) {
	defer close(m.done)
	m.Interface.Monitor(canary, tables, reload, interval, stop)
}

// TestKernelCanaryMonitor wipes every table behind the proxier's back, as a
// firewall reload does, and expects the real canary Monitor to notice and
// the resulting full sync to restore service handling, jumps included.
func TestKernelCanaryMonitor(t *testing.T) {
	eachBackend(t, func(t *testing.T, variant string, f fam) {
		real, ns := kernelIPTables(t, variant, f)
		bin := "iptables"
		if f.family == v1.IPv6Protocol {
			bin = "ip6tables"
		}
		ipt := &monitorWaiter{Interface: real, done: make(chan struct{})}
		stop := make(chan struct{})
		// Registered after kernelNetns, so it runs before the
		// namespace and PATH are torn down.
		t.Cleanup(func() {
			close(stop)
			select {
			case <-ipt.done:
			case <-time.After(30 * time.Second):
				t.Errorf("canary Monitor did not stop")
			}
		})

		_, ctx := ktesting.NewTestContext(t)
		cfg := newTestConfig(envConfig{})
		cfg.SyncPeriod = metav1.Duration{Duration: 100 * time.Millisecond} // the Monitor's poll interval
		p, err := NewProxierWithOptions(ctx, cfg, f.family, ipt, sysctltest.NewFake(), proxyutil.NewDetectLocalByCIDR(f.clusterCIDR),
			testNodeName, net.ParseIP(f.node), nil, nil, false,
			proxieropts.WithConntrack(conntrack.NewFake()), WithNFAcct(nil), proxieropts.WithServiceHealthServer(&recordingHealthServer{}),
			proxieropts.WithNetworkInterfacer(testNetwork(f)), WithStopCh(stop))
		if err != nil {
			t.Fatal(err)
		}
		p.OnServiceAdd(f.stdService(nil))
		p.OnEndpointSliceAdd(f.stdSlice())
		p.OnServiceSynced()
		p.OnEndpointSlicesSynced()

		served := func() (bool, string) {
			text := save(t, real)
			rs, err := parseRuleset(text)
			if err != nil {
				t.Fatalf("parsing iptables-save: %v\n%s", err, text)
			}
			outs, err := newTracer(rs, f.node, f.node2).trace(f.fromPod(f.pod(9), f.svc(1), 80))
			if err != nil {
				t.Fatalf("trace: %v", err)
			}
			return len(outs) == 2 && outs[0].dnat != "" && outs[1].dnat != "", text
		}
		waitFor := func(what string, cond func() bool) {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for !cond() {
				if time.Now().After(deadline) {
					t.Fatalf("timed out waiting for %s; iptables-save:\n%s", what, save(t, real))
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if ok, text := served(); !ok {
			t.Fatalf("service not handled after the first sync:\n%s", text)
		}
		// The Monitor is set up when every table's canary chain holds its
		// rule (what it checks), not merely when the chains exist: a
		// wipe between its -N and -A would otherwise race its set-up.
		canaries := func() bool {
			for _, table := range []utiliptables.Table{utiliptables.TableMangle, utiliptables.TableNAT, utiliptables.TableFilter} {
				out, err := exec.Command("ip", "netns", "exec", ns, bin+"-"+variant, "-t", string(table), "-S", string(kubeProxyCanaryChain)).CombinedOutput()
				if err != nil || !strings.Contains(string(out), "-A "+string(kubeProxyCanaryChain)) {
					return false
				}
			}
			return true
		}
		waitFor("the Monitor to create its canaries", canaries)

		// The firewall reload: every table flushed, every chain
		// deleted, as a firewall manager does it, one restore that
		// replaces each table whole. (Separate -F and -X calls raced
		// with the Monitor: having seen mangle go, kube-proxy re-added
		// filter rules between filter's -F and -X, and -X failed with
		// EBUSY.) Named explicitly, so it cannot run on the host.
		syncsBefore := p.Syncs()
		restore := exec.Command("ip", "netns", "exec", ns, bin+"-"+variant+"-restore")
		restore.Stdin = strings.NewReader("*mangle\nCOMMIT\n*nat\nCOMMIT\n*filter\nCOMMIT\n")
		if out, err := restore.CombinedOutput(); err != nil {
			t.Fatalf("%s-%s-restore of empty tables: %v: %s", bin, variant, err, out)
		}
		// The Monitor polls every 100ms and may have rewritten the rules
		// before this look: handled is right only after a sync.
		if ok, _ := served(); ok && p.Syncs() == syncsBefore {
			t.Fatalf("service still handled after wiping the tables, and no sync since")
		}

		waitFor("the Monitor-triggered resync to restore the service", func() bool { ok, _ := served(); return ok })
		text := save(t, real)
		for _, want := range []string{"-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES", "-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING", "-A FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD"} {
			if !strings.Contains(text, want) {
				t.Errorf("after the resync, iptables-save lacks %q", want)
			}
		}
		waitFor("the Monitor to re-create its canaries", canaries)
	})
}
