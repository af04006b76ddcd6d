package vm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

// ErrUnavailable marks a missing prerequisite (tool, kernel package): tests skip on it
// rather than fail, because it says nothing about kube-proxy.
var ErrUnavailable = errors.New("unavailable")

// Kernel is an unpacked kernel package (or, for Ubuntu, the image and modules packages
// unpacked into one tree).
type Kernel struct {
	// Release is the kernel's `uname -r`, e.g. "6.1.0-56-cloud-amd64".
	Release string
	// Vmlinuz is the path of the bootable image.
	Vmlinuz string
	// ModulesDir is lib/modules/<Release> inside the unpacked package. Every module in
	// it is an uncompressed .ko: compressed ones were decompressed when it was cached.
	ModulesDir string
	// Packages names the packages it was unpacked from, each with the SHA256 the
	// download was checked against ("name version sha256").
	Packages []string
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

// AptRepo is a package archive the host's apt sources do not list. It is used through a
// private apt configuration under the cache (its own sources, lists and trust), so the
// host's apt state is never changed and apt itself verifies the archive's signature and
// every download's hash.
type AptRepo struct {
	// Name is the directory under <cache>/apt holding the private apt state.
	Name string
	// Sources are one-line sources without options: "http://host/debian bullseye main".
	Sources []string
	// Keyring is a host keyring file that signs the archive (Debian's ship with
	// debian-archive-keyring). Either it or Fingerprint is set.
	Keyring string
	// Fingerprint pins the archive's signing key when the host has no keyring for it.
	// The key material comes from KeyringPackage, fetched from the same archive before
	// its signature can be checked; apt then accepts only signatures by this
	// fingerprint, so a tampered keyring package cannot make a tampered archive pass.
	Fingerprint    string
	KeyringPackage string // "ubuntu-keyring"
	KeyringSource  string // the source serving it: "http://archive.ubuntu.com/ubuntu noble main"
	KeyringFile    string // path inside it: "usr/share/keyrings/ubuntu-archive-keyring.gpg"
}

// KernelSpec names one kernel of the matrix and says how to get it.
type KernelSpec struct {
	// Name identifies it in KUBE_PROXY_VM_KERNELS and in test names: "debian12-6.1".
	Name string
	// Distro is what operators run it as: "Debian 12 (bookworm)".
	Distro string
	// Repo is nil for the host's own apt sources.
	Repo *AptRepo
	// Image matches the package holding the kernel image, newest ABI wanted; its first
	// group is the release (uname -r).
	Image *regexp.Regexp
	// Extra are more packages to unpack into the same tree, "%s" standing for the
	// release: Ubuntu ships most modules apart from the image.
	Extra []string
}

// Debian's and Ubuntu's archives. bullseye is not in this host's apt sources but is
// signed by a key debian-archive-keyring ships. Ubuntu's key is pinned by fingerprint
// (Ubuntu Archive Automatic Signing Key (2018) <ftpmaster@ubuntu.com>).
var (
	debianBullseye = &AptRepo{
		Name: "debian11",
		Sources: []string{
			"http://deb.debian.org/debian bullseye main",
			"http://deb.debian.org/debian-security bullseye-security main",
		},
		Keyring: "/usr/share/keyrings/debian-archive-keyring.gpg",
	}
	ubuntu = &AptRepo{
		Name: "ubuntu",
		Sources: []string{
			"http://archive.ubuntu.com/ubuntu jammy-updates main",
			"http://archive.ubuntu.com/ubuntu jammy-security main",
			"http://archive.ubuntu.com/ubuntu noble-updates main",
			"http://archive.ubuntu.com/ubuntu noble-security main",
		},
		Fingerprint:    "F6ECB3762474EDA9D21B7022871920D1991BC93C",
		KeyringPackage: "ubuntu-keyring",
		KeyringSource:  "http://archive.ubuntu.com/ubuntu noble main",
		KeyringFile:    "usr/share/keyrings/ubuntu-archive-keyring.gpg",
	}
)

// KernelSpecs is the matrix, oldest kernel first. Cloud flavours where the distribution
// has one (small, IPVS/nf_tables/ip_set/veth as modules, the 8250 serial console built
// in); Ubuntu's generic, whose netfilter modules are all in linux-modules (none of
// kube-proxy's needs linux-modules-extra).
var KernelSpecs = []KernelSpec{
	{Name: "debian11-5.10", Distro: "Debian 11 (bullseye)", Repo: debianBullseye,
		Image: regexp.MustCompile(`^linux-image-(5\.10\.0-[0-9]+-cloud-amd64)$`)},
	{Name: "ubuntu22.04-5.15", Distro: "Ubuntu 22.04 (jammy)", Repo: ubuntu,
		Image: regexp.MustCompile(`^linux-image-(5\.15\.0-[0-9]+-generic)$`), Extra: []string{"linux-modules-%s"}},
	{Name: "debian12-6.1", Distro: "Debian 12 (bookworm)",
		Image: regexp.MustCompile(`^linux-image-(6\.1\.0-[0-9]+-cloud-amd64)$`)},
	{Name: "ubuntu24.04-6.8", Distro: "Ubuntu 24.04 (noble)", Repo: ubuntu,
		Image: regexp.MustCompile(`^linux-image-(6\.8\.0-[0-9]+-generic)$`), Extra: []string{"linux-modules-%s"}},
	{Name: "debian12-6.12", Distro: "Debian 12 (bookworm, the 6.12 kernel of its point releases)",
		Image: regexp.MustCompile(`^linux-image-(6\.12\.[0-9]+\+deb12-cloud-amd64)$`)},
}

// DefaultKernelSpec is the kernel FetchKernel returns: Debian 12's.
const DefaultKernelSpec = "debian12-6.1"

// DefaultKernelMatrix is what runs when KUBE_PROXY_VM_KERNELS is unset: Debian 11's
// 5.10, the oldest kernel served here and the one on which nftables mode must be
// refused. Debian 12's 6.1 already runs every mode in TestDatapathInVM, so CI pays one
// more download and boot (about 1.5-3 minutes under TCG). "all" runs the five
// (README.md has the times).
const DefaultKernelMatrix = "debian11-5.10"

// SelectedKernelSpecs returns the specs KUBE_PROXY_VM_KERNELS names (comma-separated
// names, or "all"), DefaultKernelMatrix when it is unset.
func SelectedKernelSpecs() ([]KernelSpec, error) {
	sel := os.Getenv("KUBE_PROXY_VM_KERNELS")
	if sel == "" {
		sel = DefaultKernelMatrix
	}
	return selectSpecs(sel)
}

func selectSpecs(sel string) ([]KernelSpec, error) {
	if strings.TrimSpace(sel) == "all" {
		return KernelSpecs, nil
	}
	var out []KernelSpec
	for _, name := range strings.Split(sel, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		s, ok := LookupKernelSpec(name)
		if !ok {
			var known []string
			for _, s := range KernelSpecs {
				known = append(known, s.Name)
			}
			return nil, fmt.Errorf("KUBE_PROXY_VM_KERNELS: unknown kernel %q (known: %s, or all)", name, strings.Join(known, ", "))
		}
		out = append(out, s)
	}
	return out, nil
}

// LookupKernelSpec returns the spec called name.
func LookupKernelSpec(name string) (KernelSpec, bool) {
	for _, s := range KernelSpecs {
		if s.Name == name {
			return s, true
		}
	}
	return KernelSpec{}, false
}

// FetchKernel returns Debian 12's kernel (DefaultKernelSpec), cached or downloaded.
// KUBE_PROXY_VM_KERNEL (a package name) picks another package of the host's apt sources.
// Errors wrap ErrUnavailable when no package can be had.
func FetchKernel(ctx context.Context) (*Kernel, error) {
	spec, _ := LookupKernelSpec(DefaultKernelSpec)
	if p := os.Getenv("KUBE_PROXY_VM_KERNEL"); p != "" {
		release := strings.TrimPrefix(p, "linux-image-")
		spec.Image = regexp.MustCompile(`^linux-image-(` + regexp.QuoteMeta(release) + `)$`)
	}
	return FetchKernelSpec(ctx, spec)
}

// FetchKernelSpec returns the newest cached kernel matching spec, or downloads,
// verifies and unpacks the newest one its archive serves. A cached kernel wins over a
// newer one that would need a download: runs stay offline and comparable.
func FetchKernelSpec(ctx context.Context, spec KernelSpec) (*Kernel, error) {
	cache := CacheDir()
	if k := newestCached(cache, spec); k != nil {
		return k, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("creating kernel cache %s: %w", cache, err)
	}
	apt, err := aptFor(ctx, cache, spec.Repo)
	if err != nil {
		return nil, fmt.Errorf("%w: kernel %s: %w", ErrUnavailable, spec.Name, err)
	}
	names, err := apt.candidates(ctx, spec.Image)
	if err != nil {
		return nil, fmt.Errorf("%w: kernel %s: %w", ErrUnavailable, spec.Name, err)
	}
	var errs []error
	for _, name := range names {
		k, err := downloadKernel(ctx, cache, apt, spec, name)
		if err == nil {
			return k, nil
		}
		errs = append(errs, err)
		if len(errs) == 3 {
			break // the archive keeps only the newest few; older ones will fail the same way
		}
	}
	return nil, fmt.Errorf("%w: kernel %s: no package could be downloaded: %w", ErrUnavailable, spec.Name, errors.Join(errs...))
}

// newestCached returns the newest complete kernel in cache whose image package matches
// spec, or nil.
func newestCached(cache string, spec KernelSpec) *Kernel {
	dirs, _ := os.ReadDir(cache)
	var best *Kernel
	for _, d := range dirs {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			continue
		}
		if !spec.Image.MatchString("linux-image-" + d.Name()) {
			continue
		}
		k, err := cachedKernel(filepath.Join(cache, d.Name()))
		if err != nil {
			continue
		}
		if best == nil || versionLess(best.Release, k.Release) {
			best = k
		}
	}
	return best
}

// versionLess compares the digit runs of two releases numerically: "6.12.9" < "6.12.10",
// "5.10.0-9-cloud" < "5.10.0-10-cloud".
func versionLess(a, b string) bool {
	na, nb := digitRE.FindAllString(a, -1), digitRE.FindAllString(b, -1)
	for i := 0; i < len(na) && i < len(nb); i++ {
		x, _ := strconv.Atoi(na[i])
		y, _ := strconv.Atoi(nb[i])
		if x != y {
			return x < y
		}
	}
	if len(na) != len(nb) {
		return len(na) < len(nb)
	}
	return a < b
}

var digitRE = regexp.MustCompile(`[0-9]+`)

// cachedKernel returns the kernel unpacked in dir if its unpacking completed.
func cachedKernel(dir string) (*Kernel, error) {
	marker, err := os.ReadFile(filepath.Join(dir, ".complete"))
	if err != nil {
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
	var pkgs []string
	for _, l := range strings.Split(strings.TrimSpace(string(marker)), "\n") {
		if l != "" {
			pkgs = append(pkgs, l)
		}
	}
	return &Kernel{Release: release, Vmlinuz: vmlinuz, ModulesDir: mods[0], Packages: pkgs}, nil
}

// aptClient runs apt-get and apt-cache, with a private configuration when env is set.
type aptClient struct {
	env []string // extra environment (APT_CONFIG=...), nil for the host's apt
}

func (a *aptClient) command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), a.env...)
	return cmd
}

// aptListsMaxAge is how old a private apt root's package lists may get before a
// download refreshes them: archives drop superseded kernels within weeks.
const aptListsMaxAge = 24 * time.Hour

// aptFor returns an apt client for repo: the host's for nil, else a private apt root
// under <cache>/apt/<repo.Name>, set up and refreshed as needed.
func aptFor(ctx context.Context, cache string, repo *AptRepo) (*aptClient, error) {
	if repo == nil {
		return &aptClient{}, nil
	}
	root := filepath.Join(cache, "apt", repo.Name)
	for _, d := range []string{"lists/partial", "cache/archives/partial", "etc/parts", "etc/prefs", "etc/trusted"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, fmt.Errorf("creating private apt root: %w", err)
		}
	}
	conf := filepath.Join(root, "apt.conf")
	// Every directory apt reads is the private root's, so no setting or source of the
	// host's apt (proxies aside, which come from the environment) leaks in.
	settings := fmt.Sprintf(`Dir::Etc::SourceList "%[1]s/sources.list";
Dir::Etc::SourceParts "%[1]s/etc/none";
Dir::Etc::Parts "%[1]s/etc/parts";
Dir::Etc::Preferences "%[1]s/etc/none.pref";
Dir::Etc::PreferencesParts "%[1]s/etc/prefs";
Dir::Etc::Trusted "%[1]s/etc/none.gpg";
Dir::Etc::TrustedParts "%[1]s/etc/trusted";
Dir::State::Lists "%[1]s/lists";
Dir::State::status "%[1]s/status";
Dir::Cache "%[1]s/cache";
APT::Architecture "amd64";
APT::Architectures "amd64";
Acquire::Languages "none";
`, root)
	if err := os.WriteFile(conf, []byte(settings), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(root, "status"), nil, 0o644); err != nil {
		return nil, err
	}
	a := &aptClient{env: []string{"APT_CONFIG=" + conf}}

	signedBy := repo.Keyring
	if repo.Fingerprint != "" {
		signedBy = repo.Fingerprint
		keyring := filepath.Join(root, "etc/trusted", repo.Name+".gpg")
		if _, err := os.Stat(keyring); err != nil {
			if err := a.fetchKeyring(ctx, root, repo, keyring); err != nil {
				return nil, err
			}
		}
	} else if _, err := os.Stat(repo.Keyring); err != nil {
		return nil, fmt.Errorf("keyring for %s: %w (apt-get install debian-archive-keyring)", repo.Name, err)
	}
	var sources strings.Builder
	for _, s := range repo.Sources {
		fmt.Fprintf(&sources, "deb [signed-by=%s] %s\n", signedBy, s)
	}
	if err := a.updateIfStale(ctx, root, sources.String()); err != nil {
		return nil, err
	}
	return a, nil
}

// fetchKeyring gets repo's keyring package from the archive itself, unverified (there
// is nothing yet to verify it with), and installs its keyring where the private apt
// trusts keys. The pinned fingerprint in the sources is what makes this safe: apt
// accepts the archive only if that very key signed it.
func (a *aptClient) fetchKeyring(ctx context.Context, root string, repo *AptRepo, keyring string) error {
	sources := fmt.Sprintf("deb [trusted=yes] %s\n", repo.KeyringSource)
	if err := os.WriteFile(filepath.Join(root, "sources.list"), []byte(sources), 0o644); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(root, "lists", ".updated")) // the signed update must run
	if out, err := a.command(ctx, root, "apt-get", "-q", "update").CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get update (for %s): %w: %s", repo.KeyringPackage, err, bytes.TrimSpace(out))
	}
	tmp, err := os.MkdirTemp(root, ".keyring-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if out, err := a.command(ctx, tmp, "apt-get", "-q", "download", repo.KeyringPackage).CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s: %w: %s", repo.KeyringPackage, err, bytes.TrimSpace(out))
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("apt-get download %s: want one .deb, found %v", repo.KeyringPackage, debs)
	}
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], filepath.Join(tmp, "x")).CombinedOutput(); err != nil {
		return fmt.Errorf("dpkg-deb -x %s: %w: %s", debs[0], err, bytes.TrimSpace(out))
	}
	data, err := os.ReadFile(filepath.Join(tmp, "x", repo.KeyringFile))
	if err != nil {
		return fmt.Errorf("keyring package %s: %w", repo.KeyringPackage, err)
	}
	// Drop the unverified lists: the next update fetches them again under the pin.
	lists, _ := filepath.Glob(filepath.Join(root, "lists", "*_*"))
	for _, l := range lists {
		os.Remove(l)
	}
	return os.WriteFile(keyring, data, 0o644)
}

// updateIfStale writes the sources and runs apt-get update unless the lists were
// fetched with the same sources less than aptListsMaxAge ago.
func (a *aptClient) updateIfStale(ctx context.Context, root, sources string) error {
	stamp := filepath.Join(root, "lists", ".updated")
	if old, err := os.ReadFile(stamp); err == nil && string(old) == sources {
		if fi, err := os.Stat(stamp); err == nil && time.Since(fi.ModTime()) < aptListsMaxAge {
			return nil
		}
	}
	if err := os.WriteFile(filepath.Join(root, "sources.list"), []byte(sources), 0o644); err != nil {
		return err
	}
	out, err := a.command(ctx, root, "apt-get", "-q", "update").CombinedOutput()
	// apt-get update exits 0 when a source failed to verify; its warnings say so.
	if err == nil && (bytes.Contains(out, []byte("W: GPG error")) || bytes.Contains(out, []byte("is not signed"))) {
		err = errors.New("signature check failed")
	}
	if err != nil {
		return fmt.Errorf("apt-get update in %s: %w: %s", root, err, bytes.TrimSpace(out))
	}
	return os.WriteFile(stamp, []byte(sources), 0o644)
}

// candidates lists the image packages apt knows that match image, newest first.
// apt-cache reads only the local package lists.
func (a *aptClient) candidates(ctx context.Context, image *regexp.Regexp) ([]string, error) {
	// apt-cache's own regex is POSIX; searching by a prefix and filtering here keeps
	// the one Go expression authoritative.
	prefix := image.String()
	if i := strings.IndexAny(prefix, `([\`); i > 0 {
		prefix = prefix[:i]
	}
	out, err := a.command(ctx, "", "apt-cache", "search", "--names-only", prefix).Output()
	if err != nil {
		return nil, fmt.Errorf("apt-cache search %s: %w", prefix, err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(line, " ")
		if image.MatchString(name) {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool { return versionLess(names[j], names[i]) })
	if len(names) == 0 {
		return nil, fmt.Errorf("apt knows no package matching %s (run apt-get update?)", image)
	}
	return names, nil
}

// aptHash returns the version and SHA256 the package index gives for name's candidate.
func (a *aptClient) aptHash(ctx context.Context, name string) (version, sum string, err error) {
	out, err := a.command(ctx, "", "apt-cache", "show", "--no-all-versions", name).Output()
	if err != nil {
		return "", "", fmt.Errorf("apt-cache show %s: %w", name, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		switch k {
		case "Version":
			version = v
		case "SHA256":
			sum = v
		}
	}
	if version == "" || len(sum) != 64 {
		return "", "", fmt.Errorf("apt-cache show %s: no Version/SHA256", name)
	}
	return version, sum, nil
}

// downloadKernel fetches image package name (and spec's extras) into
// cache/<release>. apt verifies the archive's signature and each file's hash; the
// SHA256 of each .deb is checked once more here against the index entry and recorded
// in .complete. It unpacks into a temporary directory and renames it, so a killed run
// never leaves a half-unpacked kernel that a later run would trust.
func downloadKernel(ctx context.Context, cache string, apt *aptClient, spec KernelSpec, name string) (*Kernel, error) {
	m := spec.Image.FindStringSubmatch(name)
	if m == nil {
		return nil, fmt.Errorf("package %s does not match %s", name, spec.Image)
	}
	release := m[1]
	pkgs := []string{name}
	for _, e := range spec.Extra {
		pkgs = append(pkgs, fmt.Sprintf(e, release))
	}
	tmp, err := os.MkdirTemp(cache, ".download-")
	if err != nil {
		return nil, fmt.Errorf("creating download directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	unpacked := filepath.Join(tmp, "root")
	var marker strings.Builder
	for _, pkg := range pkgs {
		version, sum, err := apt.aptHash(ctx, pkg)
		if err != nil {
			return nil, err
		}
		dl := filepath.Join(tmp, "dl-"+pkg)
		if err := os.Mkdir(dl, 0o755); err != nil {
			return nil, err
		}
		if out, err := apt.command(ctx, dl, "apt-get", "-q", "download", pkg+"="+version).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("apt-get download %s: %w: %s", pkg, err, bytes.TrimSpace(out))
		}
		debs, _ := filepath.Glob(filepath.Join(dl, "*.deb"))
		if len(debs) != 1 {
			return nil, fmt.Errorf("apt-get download %s: want one .deb, found %v", pkg, debs)
		}
		if got, err := fileSHA256(debs[0]); err != nil {
			return nil, err
		} else if got != sum {
			return nil, fmt.Errorf("%s: SHA256 %s, the package index says %s", debs[0], got, sum)
		}
		if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], unpacked).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("dpkg-deb -x %s: %w: %s", debs[0], err, bytes.TrimSpace(out))
		}
		os.Remove(debs[0])
		fmt.Fprintf(&marker, "%s %s sha256:%s\n", pkg, version, sum)
	}
	if err := decompressModules(ctx, filepath.Join(unpacked, "lib/modules", release)); err != nil {
		return nil, fmt.Errorf("kernel %s: %w", release, err)
	}
	if err := os.WriteFile(filepath.Join(unpacked, ".complete"), []byte(marker.String()), 0o644); err != nil {
		return nil, fmt.Errorf("marking %s complete: %w", name, err)
	}
	dir := filepath.Join(cache, release)
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

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// decompressModules replaces every .ko.zst and .ko.xz under dir by the plain .ko, once,
// when the kernel is cached. The host must read each module's .modinfo for the
// dependency closure anyway, and the guest's busybox insmod (1.35) reads no zstd;
// plain modules also spare a TCG guest the decompression. zstd is decoded in Go; xz,
// for which the module graph has no decoder, by the host's xz or busybox's unxz, in
// batches.
func decompressModules(ctx context.Context, dir string) error {
	var xzs []string
	var dec *zstd.Decoder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch {
		case strings.HasSuffix(p, ".ko.xz"):
			xzs = append(xzs, p)
		case strings.HasSuffix(p, ".ko.zst"):
			if dec == nil {
				var err error
				if dec, err = zstd.NewReader(nil); err != nil {
					return err
				}
			}
			return unzstd(dec, p)
		}
		return nil
	})
	if dec != nil {
		dec.Close()
	}
	if err != nil || len(xzs) == 0 {
		return err
	}
	tool := []string{"xz", "-d"}
	if _, err := exec.LookPath("xz"); err != nil {
		bb, err := exec.LookPath("busybox")
		if err != nil {
			return fmt.Errorf("%w: %d modules are xz-compressed and neither xz nor busybox is installed", ErrUnavailable, len(xzs))
		}
		tool = []string{bb, "unxz"}
	}
	for len(xzs) > 0 {
		n := min(len(xzs), 200)
		args := append(append([]string{}, tool[1:]...), xzs[:n]...)
		if out, err := exec.CommandContext(ctx, tool[0], args...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(tool, " "), err, bytes.TrimSpace(out))
		}
		xzs = xzs[n:]
	}
	return nil
}

func unzstd(dec *zstd.Decoder, p string) error {
	in, err := os.Open(p)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := dec.Reset(in); err != nil {
		return fmt.Errorf("zstd %s: %w", p, err)
	}
	dst := strings.TrimSuffix(p, ".zst")
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, dec); err != nil {
		out.Close()
		return fmt.Errorf("zstd %s: %w", p, err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Remove(p)
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
	// SCTP Services: TestIPVS connects through an SCTP virtual server when it can.
	"sctp",
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
