package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// matrixMode is one way of running kube-proxy in the kernel matrix, with addresses of its
// own so that a rule another mode left behind could never answer for it.
type matrixMode struct {
	name     string
	flags    string
	vip      string // ClusterIP Service
	npVIP    string // the NodePort Service's cluster IP
	nodePort int
	noEPVIP  string // a Service without endpoints
	// hide lists modules the guest removes before this mode (comma-separated), to be
	// a kernel without them; such modes come last.
	hide string
	// onlyIfGated runs the mode only on kernels where plain nftables mode is refused
	// by the release gate: it shows what the kernel itself does with the gate skipped.
	onlyIfGated bool
}

// matrixModes are the four modes and the evidence runs: nftables with the release gate
// skipped (before ipvs: starting nftables mode after ipvs mode spends a minute under TCG
// removing ipvs mode's leftovers), and, last, two modes on a kernel made to lack a
// module each uses.
var matrixModes = []matrixMode{
	{name: "iptables-nft", flags: "--proxy-mode iptables --iptables-backend nft", vip: "10.96.0.11", npVIP: "10.96.2.11", nodePort: 30081, noEPVIP: "10.96.1.11"},
	{name: "iptables-legacy", flags: "--proxy-mode iptables --iptables-backend legacy", vip: "10.96.0.12", npVIP: "10.96.2.12", nodePort: 30082, noEPVIP: "10.96.1.12"},
	{name: "nftables", flags: "--proxy-mode nftables", vip: "10.96.0.13", npVIP: "10.96.2.13", nodePort: 30083, noEPVIP: "10.96.1.13"},
	{name: "nftables-skipcheck", flags: "--proxy-mode nftables", vip: "10.96.0.15", npVIP: "10.96.2.15", nodePort: 30085, noEPVIP: "10.96.1.15", onlyIfGated: true},
	{name: "ipvs", flags: "--proxy-mode ipvs", vip: "10.96.0.14", npVIP: "10.96.2.14", nodePort: 30084, noEPVIP: "10.96.1.14"},
	{name: "nftables-no-numgen", flags: "--proxy-mode nftables", vip: "10.96.0.16", npVIP: "10.96.2.16", nodePort: 30086, noEPVIP: "10.96.1.16", hide: "nft_numgen"},
	{name: "iptables-no-statistic", flags: "--proxy-mode iptables --iptables-backend nft", vip: "10.96.0.17", npVIP: "10.96.2.17", nodePort: 30087, noEPVIP: "10.96.1.17", hide: "xt_statistic"},
}

// modesFor returns the modes to run on spec's kernel, filtered by KUBE_PROXY_VM_MODES
// (comma-separated mode names) when set.
func modesFor(spec KernelSpec) []matrixMode {
	only := map[string]bool{}
	for _, m := range strings.Split(os.Getenv("KUBE_PROXY_VM_MODES"), ",") {
		if m = strings.TrimSpace(m); m != "" {
			only[m] = true
		}
	}
	var out []matrixMode
	for _, m := range matrixModes {
		if m.onlyIfGated && expectedRefusal(spec, "nftables") == "" {
			continue
		}
		if len(only) > 0 && !only[m.name] {
			continue
		}
		out = append(out, m)
	}
	return out
}

// expectedRefusal says whether kube-proxy must refuse mode on spec's kernel, and with
// which words: "" means the mode must work. The words name what is missing, not only a
// release (docs/kernels.md has the evidence).
func expectedRefusal(spec KernelSpec, mode string) string {
	switch {
	case mode == "nftables" && spec.Name == "debian11-5.10":
		return "Linux 5.13 or later for a host nft of 1.0.1 or later"
	case mode == "nftables-no-numgen":
		return "nft_numgen (numgen random: endpoint choice)"
	case mode == "iptables-no-statistic":
		return "xt_statistic (-m statistic: endpoint choice)"
	}
	return ""
}

// modeManifests is the cluster of one mode: node-1 (the guest), a ClusterIP Service and a
// NodePort Service both backed by the endpoint 198.19.1.11:8080, and a Service with no
// endpoints.
func modeManifests(m matrixMode) string {
	svc := func(name, typ, ip, extra string) string {
		return fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: %s, namespace: demo}
spec:
  type: %s
  clusterIP: %s
  clusterIPs: [%s]
  ports:
  - {name: http, port: 80, protocol: TCP, targetPort: 8080%s}
`, name, typ, ip, ip, extra)
	}
	slice := func(svcName string) string {
		return fmt.Sprintf(`---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s-abcde
  namespace: demo
  labels: {kubernetes.io/service-name: %s}
addressType: IPv4
ports:
- {name: http, port: 8080, protocol: TCP}
endpoints:
- addresses: [198.19.1.11]
  nodeName: node-1
  conditions: {ready: true, serving: true, terminating: false}
`, svcName, svcName)
	}
	return nodeManifest +
		svc("web", "ClusterIP", m.vip, "") + slice("web") +
		svc("web-np", "NodePort", m.npVIP, fmt.Sprintf(", nodePort: %d", m.nodePort)) + slice("web-np") +
		svc("web-noep", "ClusterIP", m.noEPVIP, "")
}

// nodeManifest is the guest's Node, node-1, whose InternalIP is the guest's eth0 address
// and whose podCIDR holds the endpoints on its pod0 device.
const nodeManifest = `apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels:
    kubernetes.io/hostname: node-1
spec:
  podCIDR: 198.19.1.0/24
  podCIDRs: [198.19.1.0/24]
status:
  addresses:
  - type: InternalIP
    address: 198.18.0.10
  - type: Hostname
    address: node-1
---
`

// cellOutcome judges one kernel x mode from the guest's checks: "works", "refuses:
// <reason>", or an error saying what differs from what was expected.
func cellOutcome(spec KernelSpec, mode string, checks map[string]Result) (string, error) {
	get := func(c string) (Result, bool) { r, ok := checks[mode+"/"+c]; return r, ok }
	var problems []string
	refused, isRefused := get("refused")
	if want := expectedRefusal(spec, mode); want != "" {
		switch {
		case !isRefused:
			problems = append(problems, fmt.Sprintf("must refuse with %q but did not", want))
		case !strings.Contains(refused.Detail, want):
			problems = append(problems, fmt.Sprintf("refused without naming %q: %s", want, refused.Detail))
		}
		if len(problems) > 0 {
			return "", errors.New(strings.Join(problems, "; "))
		}
		return "refuses: " + refused.Detail, nil
	}
	if isRefused {
		problems = append(problems, "refused: "+refused.Detail)
	}
	for c, pass := range map[string]bool{"synced": true, "clusterip": true, "nodeport": true, "no-endpoints": false} {
		r, ok := get(c)
		switch {
		case !ok && !isRefused:
			problems = append(problems, c+": not reported")
		case ok && r.Pass != pass:
			problems = append(problems, fmt.Sprintf("%s: want pass=%v: %s", c, pass, r))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return "", errors.New(strings.Join(problems, "; "))
	}
	return "works", nil
}

// TestKernelMatrix boots each kernel KUBE_PROXY_VM_KERNELS selects (DefaultKernelMatrix
// unless set) and runs the static kube-proxy in every mode there: a TCP connection to a
// ClusterIP and to a NodePort through it, or, where the kernel cannot run the mode, a
// refusal that names the missing feature. It logs a kernel x mode table.
func TestKernelMatrix(t *testing.T) {
	Require(t)
	specs, err := SelectedKernelSpecs()
	if err != nil {
		t.Fatal(err)
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not installed (apt-get install busybox-static)")
	}
	tools := map[string]string{}
	for _, tool := range []string{"xtables-nft-multi", "xtables-legacy-multi", "ipset", "ipvsadm", "nft", "ldd"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s not installed (the guest needs it; apt-get install iptables ipset ipvsadm nftables)", tool)
		}
		tools[tool] = p
	}
	ctx := t.Context()
	dir := t.TempDir()
	start := time.Now()
	kubeProxy := filepath.Join(dir, "kube-proxy")
	build := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w", "-o", kubeProxy, "k8s.io/kube-proxy/cmd/kube-proxy")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kube-proxy: %v\n%s", err, out)
	}
	t.Logf("TIMING kube-proxy built in %.1fs", time.Since(start).Seconds())

	var table []string
	for _, spec := range specs {
		t.Run(spec.Name, func(t *testing.T) {
			start := time.Now()
			k, err := FetchKernelSpec(ctx, spec)
			if errors.Is(err, ErrUnavailable) {
				t.Skipf("no kernel: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("TIMING kernel %s (%s) ready in %.1fs: %s", k.Release, spec.Distro, time.Since(start).Seconds(), strings.Join(k.Packages, ", "))
			start = time.Now()
			initrd := filepath.Join(t.TempDir(), "initramfs.cpio")
			var extra func(*Initramfs) error
			if expectedRefusal(spec, "nftables") != "" {
				// Evidence for the release gate: can the nft of that era read the
				// rules nftables mode writes when the gate is skipped?
				if o, err := fetchOldNft(ctx); err != nil {
					t.Logf("no Debian 11 nft for the guest (the old-nft check is left out): %v", err)
				} else {
					extra = o.add
				}
			}
			if err := buildMatrixInitramfs(k, modesFor(spec), extra, busybox, kubeProxy, tools, initrd); err != nil {
				t.Fatal(err)
			}
			t.Logf("TIMING initramfs built in %.1fs", time.Since(start).Seconds())
			start = time.Now()
			results, err := Boot(ctx, t, k.Vmlinuz, initrd, BootOptions{Timeout: 900 * time.Second, Cmdline: "loglevel=4"})
			wall := time.Since(start)
			t.Logf("TIMING guest booted, ran every mode and powered off in %.1fs", wall.Seconds())
			if err != nil {
				t.Error(err)
			}
			checks := map[string]Result{}
			for _, r := range results {
				checks[r.Name] = r
			}
			if r := checks["setup/endpoint-direct"]; !r.Pass {
				t.Errorf("guest setup failed: %v", r)
			}
			cells := map[string]string{}
			for _, m := range modesFor(spec) {
				out, err := cellOutcome(spec, m.name, checks)
				cell := out
				switch {
				case err != nil:
					t.Errorf("%s on %s: %v", m.name, k.Release, err)
					out, cell = "FAIL: "+err.Error(), "FAIL"
				case strings.HasPrefix(out, "refuses"):
					cell = "refuses"
				}
				if tm, ok := checks[m.name+"/time"]; ok {
					cell += " (" + tm.Detail + " s)"
				}
				cells[m.name] = cell
				t.Logf("MATRIX %s %s: %s", spec.Name, m.name, out)
			}
			// --cleanup after every mode ran: each of its checks must pass.
			cleanups := 0
			for name, r := range checks {
				if strings.HasPrefix(name, "cleanup/") {
					cleanups++
					if !r.Pass {
						t.Errorf("--cleanup on %s: %s", k.Release, r)
					}
				}
			}
			if cleanups == 0 {
				t.Errorf("--cleanup on %s: not reported", k.Release)
			}
			row := fmt.Sprintf("| %s | %s |", spec.Name, k.Release)
			for _, m := range matrixModes {
				c := cells[m.name]
				if c == "" {
					c = "-"
				}
				row += " " + c + " |"
			}
			table = append(table, row+fmt.Sprintf(" %.0f s |", wall.Seconds()))
		})
	}
	var names []string
	for _, m := range matrixModes {
		names = append(names, m.name)
	}
	t.Logf("kernel matrix:\n| kernel | release | %s | guest |\n%s", strings.Join(names, " | "), strings.Join(table, "\n"))
}

// buildMatrixInitramfs assembles the matrix guest: modes-init.sh as /init, the mode list
// and each mode's manifests, busybox, the module closure, the static kube-proxy, and the
// tools it and the checks exec (iptables both backends, ipset, ipvsadm, nft) with their
// libraries and the dlopen()ed xtables extensions.
func buildMatrixInitramfs(k *Kernel, modeList []matrixMode, extra func(*Initramfs) error, busybox, kubeProxy string, tools map[string]string, out string) error {
	r := NewInitramfs()
	script, err := os.ReadFile("testdata/modes-init.sh")
	if err != nil {
		return err
	}
	r.AddBytes("init", script, 0o755)
	var modes strings.Builder
	for _, m := range modeList {
		hide := m.hide
		if hide == "" {
			hide = "-"
		}
		fmt.Fprintf(&modes, "%s %s %d %s %s %s\n", m.name, m.vip, m.nodePort, m.noEPVIP, hide, m.flags)
		r.AddBytes("manifests/"+m.name+"/cluster.yaml", []byte(modeManifests(m)), 0o644)
	}
	r.AddBytes("etc/vm-modes", []byte(modes.String()), 0o644)
	if err := r.AddFile("usr/bin/kube-proxy", kubeProxy); err != nil {
		return err
	}
	mods, err := k.ModuleClosure(DefaultModules)
	if err != nil {
		return err
	}
	if err := r.AddModules(k, mods); err != nil {
		return err
	}
	// kube-proxy's kernel probe reads it to know what is built in.
	if b := filepath.Join(k.ModulesDir, "modules.builtin"); fileExists(b) {
		if err := r.AddFile(filepath.Join("lib/modules", k.Release, "modules.builtin"), b); err != nil {
			return err
		}
	}
	for _, tool := range []string{"xtables-nft-multi", "xtables-legacy-multi", "ipset", "ipvsadm", "nft"} {
		if err := r.AddDynamic("usr/sbin/"+tool, tools[tool]); err != nil {
			return err
		}
	}
	for _, fam := range []string{"iptables", "ip6tables"} {
		for _, suffix := range []string{"", "-save", "-restore"} {
			r.AddSymlink("usr/sbin/"+fam+suffix, "xtables-nft-multi")
			r.AddSymlink("usr/sbin/"+fam+"-nft"+suffix, "xtables-nft-multi")
			r.AddSymlink("usr/sbin/"+fam+"-legacy"+suffix, "xtables-legacy-multi")
		}
	}
	exts, _ := filepath.Glob("/usr/lib/x86_64-linux-gnu/xtables/*.so")
	if len(exts) == 0 {
		return errors.New("no iptables extensions in /usr/lib/x86_64-linux-gnu/xtables")
	}
	for _, e := range exts {
		if err := r.AddDynamic(e, e); err != nil {
			return err
		}
	}
	for _, f := range []string{"/etc/protocols", "/etc/services", "/etc/ethertypes"} {
		if _, err := os.Stat(f); err == nil {
			if err := r.AddFile(f, f); err != nil {
				return err
			}
		}
	}
	if extra != nil {
		if err := extra(r); err != nil {
			return err
		}
	}
	r.AddBytes("etc/hostname", []byte("node-1\n"), 0o644)
	r.AddBytes("etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	if err := r.AddBusybox(busybox); err != nil {
		return err
	}
	return r.Write(out)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestVersionLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"6.12.9+deb12-cloud-amd64", "6.12.10+deb12-cloud-amd64", true},
		{"6.12.10+deb12-cloud-amd64", "6.12.9+deb12-cloud-amd64", false},
		{"linux-image-5.10.0-9-cloud-amd64", "linux-image-5.10.0-46-cloud-amd64", true},
		{"5.15.0-204-generic", "5.15.0-204-generic", false},
		{"6.1.0-56-cloud-amd64", "6.12.1+deb12-cloud-amd64", true},
	} {
		if got := versionLess(tc.a, tc.b); got != tc.want {
			t.Errorf("versionLess(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestSelectSpecs(t *testing.T) {
	for _, tc := range []struct {
		sel     string
		want    []string
		wantErr string
	}{
		{sel: DefaultKernelMatrix, want: []string{"debian11-5.10"}},
		{sel: "debian11-5.10,debian12-6.1", want: []string{"debian11-5.10", "debian12-6.1"}},
		{sel: "all", want: []string{"debian11-5.10", "ubuntu22.04-5.15", "debian12-6.1", "ubuntu24.04-6.8", "debian12-6.12"}},
		{sel: " ubuntu24.04-6.8 ,", want: []string{"ubuntu24.04-6.8"}},
		{sel: "debian13", wantErr: `unknown kernel "debian13"`},
	} {
		got, err := selectSpecs(tc.sel)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("selectSpecs(%q) error %v, want %q", tc.sel, err, tc.wantErr)
			}
			continue
		}
		var names []string
		for _, s := range got {
			names = append(names, s.Name)
		}
		if err != nil || strings.Join(names, ",") != strings.Join(tc.want, ",") {
			t.Errorf("selectSpecs(%q) = %v, %v; want %v", tc.sel, names, err, tc.want)
		}
	}
}

// TestKernelSpecImages checks each spec's image expression against real package names,
// and that none matches another spec's kernels (the cache is shared by all of them).
func TestKernelSpecImages(t *testing.T) {
	names := map[string]string{
		"debian11-5.10":    "linux-image-5.10.0-46-cloud-amd64",
		"ubuntu22.04-5.15": "linux-image-5.15.0-204-generic",
		"debian12-6.1":     "linux-image-6.1.0-56-cloud-amd64",
		"ubuntu24.04-6.8":  "linux-image-6.8.0-151-generic",
		"debian12-6.12":    "linux-image-6.12.117+deb12-cloud-amd64",
	}
	for _, s := range KernelSpecs {
		for owner, pkg := range names {
			if got, want := s.Image.MatchString(pkg), owner == s.Name; got != want {
				t.Errorf("%s: image %s matches %s = %v, want %v", s.Name, s.Image, pkg, got, want)
			}
		}
		for _, bad := range []string{"linux-image-6.1.0-56-cloud-amd64-dbg", "linux-image-6.1.0-56-cloud-amd64-unsigned", "linux-image-cloud-amd64"} {
			if s.Image.MatchString(bad) {
				t.Errorf("%s: image %s matches %s", s.Name, s.Image, bad)
			}
		}
	}
}

// oldNft is Debian 11's nft (0.9.8), the nft a host with a pre-5.13 kernel runs, fetched
// once through the bullseye apt root into the cache. The guest runs it beside the rules
// nftables mode wrote with the release gate skipped, to show what the gate protects.
type oldNft struct {
	dir     string   // unpacked packages
	version string   // "0.9.8-3.1+deb11u2"
	libs    []string // host libraries it needs that the packages do not ship
}

func fetchOldNft(ctx context.Context) (*oldNft, error) {
	cache := CacheDir()
	dir := filepath.Join(cache, "tools", "nft-debian11")
	pkgs := []string{"nftables", "libnftables1"}
	if b, err := os.ReadFile(filepath.Join(dir, ".complete")); err != nil || len(b) == 0 {
		apt, err := aptFor(ctx, cache, debianBullseye)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		tmp, err := os.MkdirTemp(cache, ".download-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		var marker strings.Builder
		for _, p := range pkgs {
			version, sum, err := apt.aptHash(ctx, p)
			if err != nil {
				return nil, err
			}
			if out, err := apt.command(ctx, tmp, "apt-get", "-q", "download", p+"="+version).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("%w: apt-get download %s: %w: %s", ErrUnavailable, p, err, out)
			}
			debs, _ := filepath.Glob(filepath.Join(tmp, p+"_*.deb"))
			if len(debs) != 1 {
				return nil, fmt.Errorf("apt-get download %s: found %v", p, debs)
			}
			if got, err := fileSHA256(debs[0]); err != nil || got != sum {
				return nil, fmt.Errorf("%s: SHA256 %s (%v), the index says %s", debs[0], got, err, sum)
			}
			if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], filepath.Join(tmp, "root")).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("dpkg-deb -x %s: %w: %s", debs[0], err, out)
			}
			fmt.Fprintf(&marker, "%s %s sha256:%s\n", p, version, sum)
		}
		if err := os.WriteFile(filepath.Join(tmp, "root", ".complete"), []byte(marker.String()), 0o644); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, err
		}
		if err := os.Rename(filepath.Join(tmp, "root"), dir); err != nil {
			return nil, err
		}
	}
	marker, _ := os.ReadFile(filepath.Join(dir, ".complete"))
	version := strings.Fields(string(marker) + " ? ?")[1]
	libdir := filepath.Join(dir, "usr/lib/x86_64-linux-gnu")
	cmd := exec.CommandContext(ctx, "ldd", filepath.Join(dir, "usr/sbin/nft"))
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+libdir)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ldd of Debian 11's nft: %w", err)
	}
	o := &oldNft{dir: dir, version: version}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("%w: Debian 11's nft needs a library this host lacks: %s", ErrUnavailable, strings.TrimSpace(line))
		}
		_, after, ok := strings.Cut(line, "=> ")
		if !ok {
			continue
		}
		p, _, _ := strings.Cut(strings.TrimSpace(after), " ")
		if strings.HasPrefix(p, "/") && !strings.HasPrefix(p, dir) {
			o.libs = append(o.libs, p)
		}
	}
	return o, nil
}

// add puts it into the guest as /opt/nft-debian11/{nft,lib/}: its own libnftables beside
// it, so the guest's current nft and libnftables stay what kube-proxy's checks use.
func (o *oldNft) add(r *Initramfs) error {
	if err := r.AddFile("opt/nft-debian11/nft", filepath.Join(o.dir, "usr/sbin/nft")); err != nil {
		return err
	}
	libs, _ := filepath.Glob(filepath.Join(o.dir, "usr/lib/x86_64-linux-gnu/libnftables.so*"))
	for _, l := range libs {
		if err := r.AddFile("opt/nft-debian11/lib/"+filepath.Base(l), l); err != nil {
			return err
		}
	}
	for _, l := range o.libs {
		if !r.Has(l) {
			if err := r.AddFile(l, l); err != nil {
				return err
			}
		}
	}
	r.AddBytes("opt/nft-debian11/version", []byte(o.version+"\n"), 0o644)
	return nil
}

// TestDecompressModules: .ko.zst (in Go) and .ko.xz (xz or busybox) become plain .ko
// with the same bytes, and the compressed files are gone.
func TestDecompressModules(t *testing.T) {
	dir := t.TempDir()
	want := []byte("\x7fELF pretend module")
	var enc bytes.Buffer
	zw, err := zstd.NewWriter(&enc)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(want)
	zw.Close()
	if err := os.MkdirAll(filepath.Join(dir, "kernel/net"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernel/net/a.ko.zst"), enc.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	files := []string{"kernel/net/a.ko"}
	if xz, err := exec.LookPath("xz"); err == nil {
		cmd := exec.Command(xz, "-c")
		cmd.Stdin = bytes.NewReader(want)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "kernel/b.ko.xz"), out, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, "kernel/b.ko")
	} else {
		t.Log("no xz on this host: only zstd is checked")
	}
	if err := decompressModules(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %q, %v; want %q", f, got, err, want)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "kernel/*/*.zst"))
	more, _ := filepath.Glob(filepath.Join(dir, "kernel/*.xz"))
	if len(left)+len(more) > 0 {
		t.Errorf("compressed modules left: %v %v", left, more)
	}
}
