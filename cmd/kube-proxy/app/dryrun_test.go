//go:build linux

package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// The whole binary path in-process, without privileges: manifests in, informers,
// the proxier in dry-run mode, rules out.
func TestDryRunFromManifests(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want []string
	}{
		{"iptables", []string{
			"# kube-proxy --dry-run: IPv4, iptables-restore input",
			"# kube-proxy --dry-run: IPv6, iptables-restore input",
			`"demo/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80`,
			"198.19.1.10:8080",
			"--dport 30443",                       // the NodePort
			"-d 198.18.100.1",                     // the load balancer IP
			"-d fd00:10:96::14",                   // the dual-stack Service's IPv6 cluster IP
			"kube-system/kube-dns:dns cluster IP", // from the JSON List
			"COMMIT",
		}},
		{"nftables", []string{
			"# kube-proxy --dry-run: IPv4, nft script",
			"# kube-proxy --dry-run: IPv6, nft script",
			"table ip kube-proxy",
			"table ip6 kube-proxy",
			"10.96.0.10",
			"198.19.1.10",
			"30443",
			"198.18.100.1",
			"fd00:10:96::14",
			"kube-system/kube-dns",
		}},
	} {
		t.Run(tc.mode, func(t *testing.T) { testDryRun(t, tc.mode, tc.want) })
	}
}

func testDryRun(t *testing.T, mode string, wants []string) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	s, out, err := newDryRunServer(ctx, t,
		"--manifests="+filepath.Join("..", "..", "..", "examples", "cluster"),
		"--hostname-override=node-1",
		"--proxy-mode="+mode,
		"--cluster-cidr=198.19.0.0/16,fd00:1::/48",
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Config.Mode != kubeproxyconfig.ProxyMode(mode) {
		t.Fatalf("mode %s", s.Config.Mode)
	}
	text := out.String()
	for _, want := range wants {

		if !strings.Contains(text, want) {
			t.Errorf("dry-run output lacks %q", want)
		}
	}
	if strings.Contains(text, "demo/db") {
		t.Errorf("the headless Service must not be proxied")
	}
	if s.NodeIPs["IPv4"].String() != "198.18.0.10" || s.NodeIPs["IPv6"].String() != "fd00:18::10" {
		t.Errorf("node IPs from the manifest's Node: %v", s.NodeIPs)
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}

// newDryRunServer builds the binary's ProxyServer for --dry-run with args;
// what Run prints goes to the returned buffer.
func newDryRunServer(ctx context.Context, t *testing.T, args ...string) (*ProxyServer, *bytes.Buffer, error) {
	t.Helper()
	o, err := parseAndComplete(t, append(args, "--dry-run"))
	if err != nil {
		return nil, nil, err
	}
	s, err := newProxyServer(ctx, o.config, serverOptions{
		manifests: o.manifests, manifestsRescan: time.Hour, localNodeSource: o.localNodeSource,
		dryRun: true, flags: o.flags,
	})
	if err != nil {
		return nil, nil, err
	}
	out := &bytes.Buffer{}
	s.dryRunOut = out
	return s, out, nil
}

// --dry-run-follow prints the first sync, then each later one as the manifests
// change, until stopped; stopping is a clean exit.
func TestDryRunFollow(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		header string
		// what a sync after the edit says about the new cluster IP
		edited string
	}{
		{"iptables", "# kube-proxy --dry-run: IPv4, iptables-restore input", "-d 10.96.0.20 --dport 80"},
		{"nftables", "# kube-proxy --dry-run: IPv4, nft script", "10.96.0.20 . tcp . 80"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			defer cancel()

			dir := t.TempDir()
			src := filepath.Join("..", "..", "..", "examples", "cluster")
			entries, err := os.ReadDir(src)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				data, err := os.ReadFile(filepath.Join(src, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}

			o, err := parseAndComplete(t, []string{
				"--manifests=" + dir,
				"--hostname-override=node-1",
				"--proxy-mode=" + tc.mode,
				"--cluster-cidr=198.19.0.0/16,fd00:1::/48",
				"--iptables-min-sync-period=0s",
				"--dry-run-follow",
			})
			if err != nil {
				t.Fatal(err)
			}
			if !o.dryRun {
				t.Fatalf("--dry-run-follow must imply --dry-run")
			}
			s, err := newProxyServer(ctx, o.config, serverOptions{
				manifests: o.manifests, manifestsRescan: 200 * time.Millisecond, dryRun: o.dryRun, dryRunFollow: o.dryRunFollow, flags: o.flags,
			})
			if err != nil {
				t.Fatal(err)
			}
			var out lockedBuffer
			s.dryRunOut = &out
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- s.Run(runCtx) }()

			waitFor := func(what string, cond func(string) bool) {
				t.Helper()
				deadline := time.Now().Add(60 * time.Second)
				for !cond(out.String()) {
					select {
					case err := <-done:
						t.Fatalf("Run returned early (%v) while waiting for %s; output:\n%s", err, what, out.String())
					default:
					}
					if time.Now().After(deadline) {
						t.Fatalf("timed out waiting for %s; output:\n%s", what, out.String())
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			waitFor("the first sync", func(s string) bool { return strings.Contains(s, tc.header) && strings.Contains(s, "10.96.0.10") })
			if strings.Contains(out.String(), "10.96.0.20") {
				t.Fatalf("output holds the edited address before the edit")
			}
			// Still running after the first sync, unlike --dry-run.
			select {
			case err := <-done:
				t.Fatalf("Run returned after the first sync: %v", err)
			case <-time.After(300 * time.Millisecond):
			}

			web := filepath.Join(dir, "web.yaml")
			data, err := os.ReadFile(web)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(web, bytes.ReplaceAll(data, []byte("10.96.0.10"), []byte("10.96.0.20")), 0o644); err != nil {
				t.Fatal(err)
			}
			waitFor("a sync following the edit", func(s string) bool { return strings.Contains(s, tc.edited) })
			if n := strings.Count(out.String(), tc.header); n < 2 {
				t.Errorf("want a header per sync, got %d IPv4 headers", n)
			}

			stop()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run after stop: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after stop")
			}

			// Once Run has returned, the manifest source must have stopped:
			// removing the files (as the test's cleanup is about to) must not
			// delete the Node, which would make the NodeManager exit the
			// process.
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * 200 * time.Millisecond)
			if _, err := s.Client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{}); err != nil {
				t.Errorf("the manifest source kept running after Run returned: %v", err)
			}
		})
	}
}

// exampleDryRunServer is an nftables dry run of node-1 of examples/cluster,
// with a context that ends with the test (or after 90 s).
func exampleDryRunServer(t *testing.T) (context.Context, *ProxyServer, *bytes.Buffer) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancel)
	s, out, err := newDryRunServer(ctx, t,
		"--manifests="+filepath.Join("..", "..", "..", "examples", "cluster"),
		"--hostname-override=node-1", "--proxy-mode=nftables")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, s, out
}

// A dry run prints its first full sync, so that sync must include the
// ServiceCIDRs' rules even when the ServiceCIDR informer lists after the
// Services and EndpointSlices (a real proxier would add them at its next
// sync, which a dry run never reaches). CI once caught the race this pins.
func TestDryRunWaitsForServiceCIDRs(t *testing.T) {
	ctx, s, out := exampleDryRunServer(t)
	reactors, ok := s.Client.(interface {
		PrependReactor(verb, resource string, reaction clienttesting.ReactionFunc)
	})
	if !ok {
		t.Fatalf("the manifests' clientset %T takes no reactors", s.Client)
	}
	// Longer than the dry run's quiet period and the minimum sync interval.
	reactors.PrependReactor("list", "servicecidrs", func(clienttesting.Action) (bool, runtime.Object, error) {
		time.Sleep(2 * time.Second)
		return false, nil, nil
	})
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if text := out.String(); !strings.Contains(text, "ip daddr { 10.96.0.0/16 } drop") {
		t.Errorf("the first sync was printed without the ServiceCIDR 10.96.0.0/16:\n%s", text)
	}
}

// slowTopology delivers every topology report to the proxier a second late
// and records the order in which reports and the informers' synced signals
// arrive.
type slowTopology struct {
	proxy.Provider
	mu     sync.Mutex
	events []string
}

func (s *slowTopology) record(e string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
}

func (s *slowTopology) OnTopologyChange(labels map[string]string) {
	time.Sleep(time.Second)
	s.record("topology " + labels[v1.LabelTopologyZone])
	s.Provider.OnTopologyChange(labels)
}

func (s *slowTopology) OnServiceSynced() {
	s.record("services synced")
	s.Provider.OnServiceSynced()
}

// The Node's zone reaches the proxier before its first sync however late the
// topology informer reports it (its handler is added to a running informer,
// and reports asynchronously): the first sync is the only full one, and the
// dry run prints one IPv4 sync.
func TestFirstSyncHasTheNodeTopology(t *testing.T) {
	ctx, s, out := exampleDryRunServer(t)
	slow := &slowTopology{Provider: s.Proxier}
	s.Proxier = slow
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	slow.mu.Lock()
	events := slices.Clone(slow.events)
	slow.mu.Unlock()
	if len(events) < 2 || events[0] != "topology zone-a" {
		t.Errorf("the proxier heard of the Node's zone after its first sync could start: %q", events)
	}
	if n := strings.Count(out.String(), "# kube-proxy --dry-run: IPv4,"); n != 1 {
		t.Errorf("the dry run printed %d IPv4 syncs, want 1:\n%s", n, out.String())
	}
}
