//go:build linux

package app

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

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

	o, err := parseAndComplete(t, []string{
		"--manifests=" + filepath.Join("..", "..", "..", "examples", "cluster"),
		"--hostname-override=node-1",
		"--proxy-mode=" + mode,
		"--cluster-cidr=198.19.0.0/16,fd00:1::/48",
		"--dry-run",
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := newProxyServer(ctx, o.config, serverOptions{
		manifests: o.manifests, manifestsRescan: time.Hour, dryRun: true, flags: o.flags,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.dryRunOut = &out
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
