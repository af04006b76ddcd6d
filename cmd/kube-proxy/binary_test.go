//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/kube-proxy/test/kubeproxybin"
)

// quickStartArgs returns the arguments of QUICKSTART.md's first command, which
// must be `go run ./cmd/kube-proxy ...` run from the repository root, so the
// test runs what the README tells people to run.
func quickStartArgs(t *testing.T) []string {
	t.Helper()
	const prefix = "go run ./cmd/kube-proxy "
	// The section is drafted here and merged into the README; either will do.
	docs := []string{"QUICKSTART.md", filepath.Join("..", "..", "README.md")}
	for _, path := range docs {
		doc, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(line, prefix) {
				return strings.Fields(strings.TrimPrefix(line, prefix))
			}
		}
	}
	t.Fatalf("none of %v has a line starting %q", docs, prefix)
	return nil
}

// The README's first quick-start command, unprivileged: dry run on the examples,
// in both modes.
func TestBinaryQuickStartDryRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := kubeproxybin.Path(t)
	args := quickStartArgs(t)
	if !slices.Contains(args, "--dry-run") || !slices.Contains(args, "--proxy-mode") {
		t.Fatalf("the quick-start command must be a dry run naming its mode: %v", args)
	}
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) {
			modeArgs := slices.Clone(args)
			modeArgs[slices.Index(modeArgs, "--proxy-mode")+1] = mode
			cmd := exec.Command(bin, modeArgs...)
			cmd.Dir = filepath.Join("..", "..") // the repository root, as the README says
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("exit: %v\n%s", err, stderr.String())
			}
			for _, want := range []string{"# kube-proxy --dry-run: IPv4", "# kube-proxy --dry-run: IPv6", "10.96.0.10", "demo/web"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("stdout lacks %q", want)
				}
			}
		})
	}
}

// Bad input exits non-zero with a message naming the flag or field and the value.
// Every case fails before the proxy starts (no cleanup, no rules): these run in
// the host namespace.
func TestBinaryRejectsBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := kubeproxybin.Path(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := write("v1.yaml", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\nnftables:\n  masqueradeBit: 99\n")
	v2 := write("v2.yaml", "apiVersion: kubeproxy.config.k8s.io/v1alpha2\nkind: KubeProxyConfiguration\nmode: nftables\nsyncPeriod: -5s\n")
	v2unknown := write("v2u.yaml", "apiVersion: kubeproxy.config.k8s.io/v1alpha2\nkind: KubeProxyConfiguration\nmode: nftables\nnftables:\n  masqueradeBitt: 3\n")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown flag", []string{"--frobnicate"}, []string{"unknown flag: --frobnicate"}},
		{"bad flag value", []string{"--conntrack-min=lots"}, []string{"--conntrack-min", "lots"}},
		{"positional argument", []string{"extra"}, []string{"does not take any arguments", "extra"}},
		{"invalid v1alpha1 config", []string{"--config", v1}, []string{"MasqueradeBit", "99"}},
		{"invalid v1alpha2 config", []string{"--config", v2}, []string{"SyncPeriod", "-5s"}},
		{"unknown field in v1alpha2", []string{"--config", v2unknown}, []string{"masqueradeBitt", "line 5"}},
		{"ipvs without its feature gate", []string{"--proxy-mode", "ipvs", "--feature-gates", "KubeProxyIPVS=false", "--manifests", dir}, []string{"ipvs needs the KubeProxyIPVS feature gate"}},
		{"missing manifests", []string{"--manifests", filepath.Join(dir, "nope"), "--dry-run"}, []string{"nope"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(bin, tc.args...).CombinedOutput()
			if err == nil {
				t.Fatalf("exit 0, want failure; output:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not mention %q:\n%s", w, out)
				}
			}
		})
	}
}
