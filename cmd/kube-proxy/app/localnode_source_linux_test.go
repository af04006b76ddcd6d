//go:build linux

package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	lnserver "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/server"
	proxymetrics "k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source/manifests"
)

// copyExamplesWithout copies examples/cluster into a temporary directory, leaving out
// the named files.
func copyExamplesWithout(t *testing.T, skip ...string) string {
	t.Helper()
	dir := t.TempDir()
	src := examplesDir(t)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".md") || slicesContains(skip, e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// startLocalNodeServer serves dir's manifests as node nodeName's LocalNode server at a
// fresh unix socket, until the test ends.
func startTestLocalNodeServer(t *testing.T, dir, nodeName string) string {
	t.Helper()
	srv, err := lnserver.New(lnserver.Options{Proxy: proxyrun.Options{
		NodeName: nodeName, Families: []localnode.Family{localnode.IPv4, localnode.IPv6},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := "unix://" + filepath.Join(t.TempDir(), "ln.sock")
	done := make(chan struct{}, 2)
	go func() { _ = srv.Run(ctx, manifests.New(dir, nodeName, time.Hour)); done <- struct{}{} }()
	go func() { _ = srv.Serve(ctx, lnserver.ServeOptions{Address: addr}); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	return addr
}

// dryRunRules runs the binary's ProxyServer in --dry-run mode with args and returns what
// it prints.
func dryRunRules(ctx context.Context, t *testing.T, args ...string) (string, *ProxyServer, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	s, out, err := newDryRunServer(ctx, t, args...)
	if err != nil {
		return "", nil, err
	}
	if err := s.Run(ctx); err != nil {
		return "", nil, err
	}
	return out.String(), s, nil
}

// A built-in mode fed over the socket programs exactly what it programs reading the
// same objects itself: the server's global view carries every Service, EndpointSlice
// and ServiceCIDR to the proxier, and the Node to the NodeManager.
func TestLocalNodeSourceDryRunMatchesManifests(t *testing.T) {
	t.Parallel()
	// The proxiers' metrics are registered once per process by the first Run; the
	// in-process server below uses them from its start, so register them first.
	proxymetrics.RegisterMetrics(kubeproxyconfig.ProxyModeIPTables)

	// Every example, ServiceCIDRs included: nftables drops traffic to their unallocated
	// addresses, so rules fed without them would differ.
	dir := copyExamplesWithout(t)
	wantNodeIPs := "IPv4=198.18.0.10 IPv6=fd00:18::10"
	addr := startTestLocalNodeServer(t, dir, "node-1")

	// The dry runs are independent: run them at once.
	_, ctx := ktesting.NewTestContext(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	outs := map[string]string{}
	nodeIPs := map[string]string{}
	for _, mode := range []string{"iptables", "nftables"} {
		for _, from := range []string{"--manifests=" + dir, "--localnode-source=" + addr} {
			name := mode + "/" + strings.SplitN(from, "=", 2)[0][2:]
			wg.Go(func() {
				out, s, err := dryRunRules(ctx, t, "--hostname-override=node-1", "--proxy-mode="+mode,
					"--cluster-cidr=198.19.0.0/16,fd00:1::/48", from)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				if n := s.NodeManager.Node(); n == nil || n.Labels[v1.LabelTopologyZone] != "zone-a" {
					t.Errorf("%s: NodeManager's Node: %v", name, n)
				}
				mu.Lock()
				defer mu.Unlock()
				outs[name] = out
				nodeIPs[name] = fmt.Sprintf("IPv4=%s IPv6=%s", s.NodeIPs[v1.IPv4Protocol], s.NodeIPs[v1.IPv6Protocol])
			})
		}
	}
	wg.Wait()
	for _, mode := range []string{"iptables", "nftables"} {
		want, got := outs[mode+"/manifests"], outs[mode+"/localnode-source"]
		if want == "" || got == "" {
			continue // the run failed and said why
		}
		// A dry run prints every sync made before its output settles, and the
		// --manifests run makes a second, identical full sync when its Node's topology
		// arrives after the lists (informer timing): compare the rule lines, not how
		// often each was written.
		if diff := lineDiff(want, got); diff != "" {
			t.Errorf("%s: rules fed over %s differ from --manifests' (-manifests +localnode):\n%s", mode, addr, diff)
		}
		if !strings.Contains(got, "kube-system/kube-dns") || !strings.Contains(got, "198.19.1.10") {
			t.Errorf("%s: the rules lack the example's Services:\n%s", mode, got)
		}
		if ips := nodeIPs[mode+"/localnode-source"]; ips != wantNodeIPs {
			t.Errorf("%s: node IPs %s, want %s", mode, ips, wantNodeIPs)
		}
	}
}

// lineDiff lists the lines only in a (-) or only in b (+), in a's and b's order.
func lineDiff(a, b string) string {
	inA, inB := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(a, "\n") {
		inA[l] = true
	}
	for _, l := range strings.Split(b, "\n") {
		inB[l] = true
	}
	var out strings.Builder
	for _, l := range strings.Split(a, "\n") {
		if !inB[l] {
			out.WriteString("- " + l + "\n")
			inB[l] = true // once
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !inA[l] {
			out.WriteString("+ " + l + "\n")
			inA[l] = true
		}
	}
	return out.String()
}
