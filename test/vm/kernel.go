package vm

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ErrUnavailable marks a missing prerequisite (tool, kernel package): tests skip on it
// rather than fail, because it says nothing about kube-proxy.
var ErrUnavailable = errors.New("unavailable")

// Kernel is an unpacked Debian kernel package.
type Kernel struct {
	// Release is the kernel's `uname -r`, e.g. "6.1.0-56-cloud-amd64".
	Release string
	// Vmlinuz is the path of the bootable image.
	Vmlinuz string
	// ModulesDir is lib/modules/<Release> inside the unpacked package.
	ModulesDir string
}

// DefaultCacheDir is where kernels are cached unless KUBE_PROXY_VM_CACHE says otherwise.
// It is outside the repository so a download survives `git clean` and is shared by
// worktrees.
const DefaultCacheDir = "/var/cache/kube-proxy-vm"

// CacheDir returns the kernel cache directory.
func CacheDir() string {
	if d := os.Getenv("KUBE_PROXY_VM_CACHE"); d != "" {
		return d
	}
	return DefaultCacheDir
}

// cloudKernelRE matches the versioned Debian 12 cloud kernel packages. The cloud flavour
// is chosen because it is small (few drivers) yet has IPVS, nf_tables, ip_set and
// veth/dummy as modules and the 8250 serial console built in.
var cloudKernelRE = regexp.MustCompile(`^linux-image-(6\.1\.0-([0-9]+)-cloud-amd64)$`)

// kernelCandidates lists the packages to try, newest ABI first. KUBE_PROXY_VM_KERNEL
// (a package name) pins one. The archive drops old ABIs after security updates, so a
// fixed name would rot; apt-cache reads only the local package lists.
func kernelCandidates(ctx context.Context) ([]string, error) {
	if p := os.Getenv("KUBE_PROXY_VM_KERNEL"); p != "" {
		return []string{p}, nil
	}
	out, err := exec.CommandContext(ctx, "apt-cache", "search", "--names-only", `^linux-image-6\.1\.0-[0-9]+-cloud-amd64$`).Output()
	if err != nil {
		return nil, fmt.Errorf("%w: apt-cache search for a cloud kernel: %w", ErrUnavailable, err)
	}
	type cand struct {
		name string
		abi  int
	}
	var cs []cand
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(line, " ")
		m := cloudKernelRE.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		abi, _ := strconv.Atoi(m[2])
		cs = append(cs, cand{name, abi})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].abi > cs[j].abi })
	var names []string
	for _, c := range cs {
		names = append(names, c.name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: apt-cache knows no linux-image-6.1.0-*-cloud-amd64 package (run apt-get update?)", ErrUnavailable)
	}
	return names, nil
}

// FetchKernel returns a cached kernel, downloading and unpacking the newest cloud kernel
// package that apt can fetch when none is cached. Errors wrap ErrUnavailable when the
// package cannot be had.
func FetchKernel(ctx context.Context) (*Kernel, error) {
	names, err := kernelCandidates(ctx)
	if err != nil {
		return nil, err
	}
	cache := CacheDir()
	// A cached kernel wins over a newer one that would need a download: runs stay offline
	// and comparable.
	for _, name := range names {
		if k, err := cachedKernel(filepath.Join(cache, strings.TrimPrefix(name, "linux-image-"))); err == nil {
			return k, nil
		}
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("creating kernel cache %s: %w", cache, err)
	}
	var errs []error
	for _, name := range names {
		k, err := downloadKernel(ctx, cache, name)
		if err == nil {
			return k, nil
		}
		errs = append(errs, err)
		if len(errs) == 3 {
			break // the archive keeps only the newest few; older ones will fail the same way
		}
	}
	return nil, fmt.Errorf("%w: no kernel package could be downloaded: %w", ErrUnavailable, errors.Join(errs...))
}

// cachedKernel returns the kernel unpacked in dir if its unpacking completed.
func cachedKernel(dir string) (*Kernel, error) {
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		return nil, err
	}
	mods, err := filepath.Glob(filepath.Join(dir, "lib/modules/*"))
	if err != nil || len(mods) != 1 {
		return nil, fmt.Errorf("kernel cache %s: want one lib/modules/<release>, found %v", dir, mods)
	}
	release := filepath.Base(mods[0])
	vmlinuz := filepath.Join(dir, "boot", "vmlinuz-"+release)
	if _, err := os.Stat(vmlinuz); err != nil {
		return nil, fmt.Errorf("kernel cache %s: %w", dir, err)
	}
	return &Kernel{Release: release, Vmlinuz: vmlinuz, ModulesDir: mods[0]}, nil
}

// downloadKernel fetches package name into cache/<release>. It unpacks into a temporary
// directory and renames it, so a killed run never leaves a half-unpacked kernel that a
// later run would trust.
func downloadKernel(ctx context.Context, cache, name string) (*Kernel, error) {
	tmp, err := os.MkdirTemp(cache, ".download-")
	if err != nil {
		return nil, fmt.Errorf("creating download directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "apt-get", "download", name)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("apt-get download %s: %w: %s", name, err, bytes.TrimSpace(out))
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return nil, fmt.Errorf("apt-get download %s: want one .deb, found %v", name, debs)
	}
	unpacked := filepath.Join(tmp, "root")
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], unpacked).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("dpkg-deb -x %s: %w: %s", debs[0], err, bytes.TrimSpace(out))
	}
	if err := os.WriteFile(filepath.Join(unpacked, ".complete"), []byte(name+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("marking %s complete: %w", name, err)
	}
	dir := filepath.Join(cache, strings.TrimPrefix(name, "linux-image-"))
	if _, err := cachedKernel(dir); err != nil {
		_ = os.RemoveAll(dir) // an incomplete earlier attempt
	}
	if err := os.Rename(unpacked, dir); err != nil {
		// Another test process may have unpacked the same kernel meanwhile.
		if k, cerr := cachedKernel(dir); cerr == nil {
			return k, nil
		}
		return nil, fmt.Errorf("moving %s into the cache: %w", name, err)
	}
	return cachedKernel(dir)
}

// DefaultModules are the module name patterns (path.Match on the name without .ko)
// kube-proxy's modes may need: IPVS and its schedulers, conntrack and NAT, nf_tables and
// its expressions, x_tables with the matches and targets, ip sets, and the virtual
// devices tests build pods from.
var DefaultModules = []string{
	// Text search algorithms first: conntrack helpers such as amanda request ts_kmp while
	// they initialise, and the guest loads modules in this order without autoloading.
	"ts_*",
	"ip_vs", "ip_vs_*",
	"nf_conntrack*", "nf_nat*", "nf_defrag_*", "nf_reject_*", "nf_socket_*", "nf_tproxy_*",
	"nfnetlink*", "nf_tables", "nft_*",
	"x_tables", "xt_*", "ip_tables", "ip6_tables", "iptable_*", "ip6table_*", "ipt_*", "ip6t_*",
	"ip_set", "ip_set_*",
	"veth", "dummy", "bridge", "br_netfilter",
}

// Module is one kernel module of a closure.
type Module struct {
	Name string // "ip_vs"
	Path string // relative to ModulesDir: "kernel/net/netfilter/ipvs/ip_vs.ko"
	Deps []string
}

// ModuleClosure returns the modules whose names match any of patterns plus everything they
// depend on, ordered so that each module comes after its dependencies (the order insmod
// needs).
//
// Dependencies are read from each module's own .modinfo "depends=" field rather than from
// modules.dep: Debian packages ship no modules.dep (their postinst runs depmod), and the
// host may have no depmod to run.
func (k *Kernel) ModuleClosure(patterns []string) ([]Module, error) {
	byName := map[string]*Module{}
	var names []string
	err := filepath.WalkDir(filepath.Join(k.ModulesDir, "kernel"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".ko") {
			return nil
		}
		deps, err := moduleDepends(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(k.ModulesDir, p)
		name := moduleName(rel)
		byName[name] = &Module{Name: name, Path: filepath.ToSlash(rel), Deps: deps}
		names = append(names, name)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the modules of %s: %w", k.Release, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("kernel %s has no uncompressed .ko modules under %s", k.Release, k.ModulesDir)
	}
	sort.Strings(names)
	var order []Module
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("kernel %s: module dependency cycle through %s", k.Release, name)
		case 2:
			return nil
		}
		m, ok := byName[name]
		if !ok {
			return fmt.Errorf("kernel %s: module %s is needed but not shipped", k.Release, name)
		}
		state[name] = 1
		for _, d := range m.Deps {
			if err := visit(d); err != nil {
				return err
			}
		}
		state[name] = 2
		out := *m
		// Deps as paths, the form modules.dep uses.
		out.Deps = nil
		for _, d := range m.Deps {
			out.Deps = append(out.Deps, byName[d].Path)
		}
		order = append(order, out)
		return nil
	}
	for _, pat := range patterns {
		matched := false
		for _, name := range names {
			if ok, _ := path.Match(pat, name); ok {
				matched = true
				if err := visit(name); err != nil {
					return nil, err
				}
			}
		}
		if !matched && !strings.ContainsAny(pat, "*?[") {
			return nil, fmt.Errorf("kernel %s has no module %q", k.Release, pat)
		}
	}
	return order, nil
}

// moduleDepends returns the names in the "depends=" entry of a module's .modinfo section
// (NUL-separated key=value strings).
func moduleDepends(file string) ([]string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, fmt.Errorf("reading module %s: %w", file, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s has no .modinfo section", file)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("reading .modinfo of %s: %w", file, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				if d != "" {
					deps = append(deps, strings.ReplaceAll(d, "-", "_"))
				}
			}
			return deps, nil
		}
	}
	return nil, nil
}

// moduleName turns "kernel/net/x/nf_nat-foo.ko.xz" into "nf_nat_foo", the name the kernel
// and modprobe use.
func moduleName(p string) string {
	base := path.Base(p)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}
