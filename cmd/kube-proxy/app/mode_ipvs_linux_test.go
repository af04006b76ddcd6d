//go:build linux

package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
	utilipset "k8s.io/net-utils/ipset"
	ipsettest "k8s.io/net-utils/ipset/testing"
	utilipvs "k8s.io/net-utils/ipvs"
	ipvstest "k8s.io/net-utils/ipvs/testing"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

func TestCheckIPVSAvailable(t *testing.T) {
	noIPVS := errors.New("no IPVS generic netlink family")
	for _, tc := range []struct {
		name      string
		available error
		ipsetVer  string
		wantErr   string
	}{
		{name: "available", ipsetVer: "v7.17"},
		{name: "kernel without IPVS", available: noIPVS, ipsetVer: "v7.17", wantErr: "the kernel lacks IPVS support"},
		{name: "old ipset", ipsetVer: "v5.1", wantErr: "ipset version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oldAvail, oldHandles := ipvsAvailable, newIPVSHandles
			t.Cleanup(func() { ipvsAvailable, newIPVSHandles = oldAvail, oldHandles })
			ipvsAvailable = func() error { return tc.available }
			newIPVSHandles = func() (utilipvs.Interface, utilipset.Interface, error) {
				return ipvstest.NewFake(), ipsettest.NewFake(tc.ipsetVer), nil
			}
			_, ctx := ktesting.NewTestContext(t)
			cfg := &kubeproxyconfig.KubeProxyConfiguration{Mode: kubeproxyconfig.ProxyModeIPVS}
			err := checkModeAvailable(ctx, cfg)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestIPVSModeWithoutKernelSupport runs the binary with --proxy-mode=ipvs
// in a private network namespace of a kernel without IPVS: it must exit
// non-zero naming the missing support, and leave the namespace's rules
// (here an nftables table and an iptables chain of other modes, which the
// mode switch would otherwise clean up) alone.
func TestIPVSModeWithoutKernelSupport(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	for _, bin := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s: %v", bin, err)
		}
	}
	if utilipvs.Available() == nil {
		t.Skip("this kernel has IPVS; the test is about kernels without it")
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	ns := "kp-ipvs-" + hex.EncodeToString(rnd[:])
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	inNS := func(args ...string) (string, error) {
		out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
		return string(out), err
	}
	mustNS := func(args ...string) string {
		t.Helper()
		out, err := inNS(args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	mustNS("ip", "link", "set", "lo", "up")
	mustNS("ip", "addr", "add", "198.18.0.10/24", "dev", "lo")
	mustNS("nft", "add", "table", "ip", "kube-proxy")
	mustNS("nft", "add", "chain", "ip", "kube-proxy", "services")
	before := mustNS("nft", "list", "ruleset")

	manifests := t.TempDir()
	src := filepath.Join("..", "..", "..", "examples", "cluster")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if data, err := os.ReadFile(filepath.Join(src, e.Name())); err == nil {
			_ = os.WriteFile(filepath.Join(manifests, e.Name()), data, 0o644)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The test binary runs kube-proxy's command (TestKubeProxyHelperProcess),
	// which saves building the real binary.
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, self, "-test.run=^TestKubeProxyHelperProcess$", "--",
		"--proxy-mode=ipvs", "--manifests="+manifests, "--hostname-override=node-1")
	cmd.Env = append(os.Environ(), kubeProxyHelperEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() == 0 {
		t.Fatalf("kube-proxy --proxy-mode=ipvs: %v, want a non-zero exit\n%s", err, out)
	}
	if !strings.Contains(string(out), "the kernel lacks IPVS support") {
		t.Errorf("output does not name the missing kernel support:\n%s", out)
	}
	if after := mustNS("nft", "list", "ruleset"); after != before {
		t.Errorf("the failed start changed nftables:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
