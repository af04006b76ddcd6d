//go:build linux

package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/ebpf"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// socketLBHost makes a cgroup of the test's own under the unified root (never the
// root itself) and a private bpf filesystem for the pins, both removed at cleanup; it
// skips, saying why, where the host cannot load the socket load balancer.
func socketLBHost(t *testing.T) (cg, pin string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a cgroup and a bpf filesystem and loads BPF programs")
	}
	root, err := ebpf.UnifiedCgroupRoot()
	if err != nil {
		t.Skipf("needs a cgroup v2 hierarchy: %v", err)
	}
	if err := ebpf.CheckKernel(ebpf.Config{CgroupPath: root, PinPath: "/sys/fs/bpf/x"}); err != nil && !strings.Contains(err.Error(), "bpf filesystem") {
		t.Skipf("this kernel cannot run the socket load balancer: %v", err)
	}
	cg = filepath.Join(root, fmt.Sprintf("kube-proxy-app-socketlb-test-%d-%s", os.Getpid(), strings.NewReplacer("/", "-").Replace(t.Name())))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(cg); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("removing test cgroup %s: %v", cg, err)
		}
	})
	bpffs := t.TempDir()
	if err := unix.Mount("bpf", bpffs, "bpf", 0, ""); err != nil {
		t.Skipf("cannot mount a bpf filesystem: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(bpffs, unix.MNT_DETACH) })
	pin = filepath.Join(bpffs, "socketlb")
	// Whatever a test leaves is removed, so the cgroup can go.
	t.Cleanup(func() { _ = ebpf.Cleanup(pin) })
	return cg, pin
}

// programSocketLB attaches the socket load balancer to cg, writes states to its maps
// and closes it as a stopping kube-proxy does: programs attached, maps pinned.
func programSocketLB(t *testing.T, cg, pin string, states ...*localnode.State) {
	t.Helper()
	dp, err := ebpf.Open(ebpf.Config{CgroupPath: cg, PinPath: pin})
	if err != nil {
		t.Fatalf("attaching the socket load balancer: %v", err)
	}
	defer dp.Close()
	d := backend.NewDiffer(ebpf.NewBackend(dp.Maps(), []netip.Addr{netip.MustParseAddr("198.18.0.10")}, dp.Adopted))
	for _, st := range states {
		st.Normalize()
		if err := d.Sync(context.Background(), st); err != nil {
			t.Fatalf("syncing the maps: %v", err)
		}
	}
}

func lbService(name string, proto localnode.Protocol, vip string, mod func(*localnode.Service), eps ...string) localnode.Service {
	s := localnode.Service{ServicePort: localnode.ServicePort{
		Name:      localnode.PortName{Namespace: "ns", Name: name, Port: "p", Protocol: proto},
		ClusterIP: netip.MustParseAddr(vip), Port: 80,
	}, HasAnyEndpoints: len(eps) > 0}
	for _, ip := range eps {
		s.Endpoints = append(s.Endpoints, localnode.Endpoint{IP: netip.MustParseAddr(ip), Port: 8080, Ready: true, Serving: true, ForCluster: true, ForLocal: true})
	}
	if mod != nil {
		mod(&s)
	}
	return s
}

// TestTraceSocketLB: `kube-proxy trace` reports the translation the socket load
// balancer's real, pinned maps make, for each kind of answer, and says when the
// hooks do not see the packet.
func TestTraceSocketLB(t *testing.T) {
	cg, pin := socketLBHost(t)
	programSocketLB(t, cg, pin,
		&localnode.State{Family: localnode.IPv4, Services: []localnode.Service{
			lbService("web", localnode.TCP, "10.96.0.10", func(s *localnode.Service) {
				s.NodePort = 30080
				s.SessionAffinity, s.AffinityTimeout = localnode.AffinityClientIP, time.Hour
			}, "198.18.1.1", "198.18.1.2"),
			lbService("none", localnode.UDP, "10.96.0.11", nil),
			lbService("sig", localnode.SCTP, "10.96.0.12", nil, "198.18.1.3"),
		}},
		&localnode.State{Family: localnode.IPv6, Services: []localnode.Service{
			lbService("web6", localnode.TCP, "fd00:96::10", nil, "fd00::1:1"),
		}},
	)
	pod := netip.MustParseAddr("198.19.1.5")
	pk := func(dst string, port uint16, proto string, from trace.Origin) trace.Packet {
		d := netip.MustParseAddr(dst)
		src := pod
		if d.Is6() {
			src = netip.MustParseAddr("fd00::5")
		}
		return trace.Packet{Src: src, Dst: d, Port: port, Protocol: proto, From: from}
	}
	for _, tc := range []struct {
		name       string
		pk         trace.Packet
		applies    bool
		translated bool
		reject     bool
		endpoints  []string
		affinity   int64
	}{
		{"ClusterIP with affinity", pk("10.96.0.10", 80, "tcp", trace.FromPod), true, true, false, []string{"198.18.1.1:8080", "198.18.1.2:8080"}, 3600},
		{"NodePort from the node", pk("198.18.0.10", 30080, "tcp", trace.FromHost), true, true, false, []string{"198.18.1.1:8080", "198.18.1.2:8080"}, 3600},
		{"IPv6 ClusterIP", pk("fd00:96::10", 80, "tcp", trace.FromPod), true, true, false, []string{"[fd00::1:1]:8080"}, 0},
		{"no endpoints", pk("10.96.0.11", 80, "udp", trace.FromPod), true, true, true, nil, 0},
		{"other protocol of a Service", pk("10.96.0.10", 80, "udp", trace.FromPod), true, false, false, nil, 0},
		{"not a Service", pk("10.96.0.99", 80, "tcp", trace.FromPod), true, false, false, nil, 0},
		{"from another host", pk("10.96.0.10", 80, "tcp", trace.FromExternal), false, false, false, nil, 0},
		{"SCTP", pk("10.96.0.12", 80, "sctp", trace.FromPod), false, false, false, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readSocketLB(tc.pk, pin, false)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatal("no socket load-balancing answer with maps pinned")
			}
			var eps []string
			for _, ep := range got.Endpoints {
				eps = append(eps, ep.Endpoint)
			}
			if !got.Attached || got.Applies != tc.applies || got.Translated != tc.translated || got.Reject != tc.reject ||
				strings.Join(eps, ",") != strings.Join(tc.endpoints, ",") || got.AffinitySeconds != tc.affinity {
				t.Errorf("got %+v\nwant applies %t translated %t reject %t endpoints %v affinity %d", got, tc.applies, tc.translated, tc.reject, tc.endpoints, tc.affinity)
			}
		})
	}

	// The maps themselves carry no SCTP entry: SCTP falls through to the rules.
	maps, closeMaps, err := ebpf.OpenPinnedReadOnly(pin)
	if err != nil {
		t.Fatal(err)
	}
	if tr, err := maps.Lookup(netip.MustParseAddrPort("10.96.0.12:80"), localnode.SCTP); err != nil || tr != nil {
		t.Errorf("SCTP Service in the maps: %+v, %v", tr, err)
	}
	closeMaps()

	t.Run("whole command", func(t *testing.T) {
		ns := newTraceNetns(t, "nft")
		for _, output := range []string{"text", "json"} {
			out, err := runTraceWithSocketLB(t, pin, "--netns="+ns, "--proxy-mode=nftables", "--local-addresses=198.18.0.10",
				"--cluster-cidr=198.19.0.0/16", "--from=198.19.1.5", "--to=10.96.0.10:80", "-o", output)
			if err != nil {
				t.Fatalf("%s: %v", output, err)
			}
			if output == "text" {
				for _, want := range []string{"Socket load balancing (maps pinned at " + pin, "-> 198.18.1.1:8080  50.0%", "-> 198.18.1.2:8080  50.0%", "1h0m0s"} {
					if !strings.Contains(out, want) {
						t.Errorf("text answer lacks %q:\n%s", want, out)
					}
				}
				continue
			}
			var r traceReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if r.SocketLB == nil || !r.SocketLB.Translated || len(r.SocketLB.Endpoints) != 2 {
				t.Errorf("json socketLB %+v", r.SocketLB)
			}
		}
	})
	t.Run("nothing pinned", func(t *testing.T) {
		p := trace.Packet{Src: pod, Dst: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: "tcp", From: trace.FromPod}
		empty := filepath.Join(filepath.Dir(pin), "none")
		if got, err := readSocketLB(p, empty, false); err != nil || got != nil {
			t.Errorf("without --socket-lb: %+v, %v; want no answer", got, err)
		}
		if got, err := readSocketLB(p, empty, true); err != nil || got == nil || !strings.Contains(got.Why, "not running") {
			t.Errorf("with --socket-lb: %+v, %v; want one saying it is not running", got, err)
		}
	})
}

// runTraceWithSocketLB is runTrace reading the socket load balancer at pin.
func runTraceWithSocketLB(t *testing.T, pin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd, to := newTraceCommandOptions()
	to.selfCommand = helperSelfCommand
	to.socketLBPinPath = pin
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.ParseFlags(args); err != nil {
		return "", err
	}
	var out bytes.Buffer
	err := to.run(ctx, cmd.Flags(), &out)
	return out.String(), err
}

// TestSocketLBRemovedWhenOff: what a run with --socket-lb left (programs attached to
// the cgroup, maps and links pinned) is detached and unpinned, and logged, by a start
// without it and by --cleanup, leaving no pin and no attached program; a start with
// it leaves it for re-adoption.
func TestSocketLBRemovedWhenOff(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cleanup     bool
		enabled     bool
		wantRemoved bool
	}{
		{"start without --socket-lb", false, false, true},
		{"--cleanup", true, true, true},
		{"start with --socket-lb", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg, pin := socketLBHost(t)
			programSocketLB(t, cg, pin, &localnode.State{Family: localnode.IPv4, Services: []localnode.Service{
				lbService("web", localnode.TCP, "10.96.0.10", nil, "198.18.1.1"),
			}})
			before, err := ebpf.AttachedPrograms(cg)
			if err != nil {
				t.Fatal(err)
			}
			if len(before) != 8 {
				t.Fatalf("before: programs attached per hook %v, want all 8 hooks", before)
			}

			var logs bytes.Buffer
			ctx := klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&logs))))
			cleanups := platformCleanups(kubeproxyconfig.ProxyModeNFTables, tc.cleanup, socketLBOptions{enabled: tc.enabled, pinPath: pin})
			if c := cleanups["socketlb"]; c != nil {
				if failed := c(ctx); failed {
					t.Fatalf("the socket LB cleanup failed:\n%s", logs.String())
				}
			}

			pinned, err := ebpf.Pinned(pin)
			if err != nil {
				t.Fatal(err)
			}
			attached, err := ebpf.AttachedPrograms(cg)
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(pin)
			if !tc.wantRemoved {
				if len(pinned) == 0 || len(attached) != 8 {
					t.Errorf("a start with --socket-lb removed it: pinned %v, attached %v", pinned, attached)
				}
				return
			}
			if len(pinned) != 0 || !errors.Is(statErr, os.ErrNotExist) {
				t.Errorf("left pinned: %v (pin path: %v)", pinned, statErr)
			}
			if len(attached) != 0 {
				t.Errorf("left attached to %s: %v", cg, attached)
			}
			if !strings.Contains(logs.String(), "Removing the socket load balancer pinned by an earlier run") || !strings.Contains(logs.String(), "link_connect4") {
				t.Errorf("the removal was not logged with what was pinned:\n%s", logs.String())
			}
			// A second run finds nothing and says nothing at the default verbosity.
			logs.Reset()
			if failed := cleanups["socketlb"](ctx); failed || strings.Contains(logs.String(), "Removing") {
				t.Errorf("second cleanup: failed %t, logs %q", failed, logs.String())
			}
		})
	}
}
