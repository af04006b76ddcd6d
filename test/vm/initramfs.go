package vm

import (
	"bufio"
	"compress/gzip"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Initramfs collects the files of a guest's root filesystem and writes them as a gzipped
// newc cpio archive, the format the kernel unpacks into its initial rootfs. It is written
// in Go so that building one needs neither the cpio tool nor root-owned staging trees.
type Initramfs struct {
	entries map[string]entry
}

type entry struct {
	mode   uint32 // file type and permission bits, as in struct stat
	src    string // host file to copy, for regular files
	data   []byte // contents, for regular files without src
	target string // for symlinks
}

const (
	modeDir     = 0o040000
	modeRegular = 0o100000
	modeSymlink = 0o120000
)

// NewInitramfs returns an archive holding the directories every guest needs.
func NewInitramfs() *Initramfs {
	r := &Initramfs{entries: map[string]entry{}}
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "lib", "lib64", "etc", "proc", "sys", "dev", "run", "tmp", "var", "root"} {
		r.mkdirAll(d)
	}
	return r
}

func clean(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

func (r *Initramfs) mkdirAll(p string) {
	p = clean(p)
	if p == "" || p == "." {
		return
	}
	if _, ok := r.entries[p]; ok {
		return
	}
	r.mkdirAll(path.Dir(p))
	r.entries[p] = entry{mode: modeDir | 0o755}
}

func (r *Initramfs) put(p string, e entry) {
	p = clean(p)
	r.mkdirAll(path.Dir(p))
	r.entries[p] = e
}

// AddBytes adds a regular file with the given contents and permission bits.
func (r *Initramfs) AddBytes(dst string, data []byte, perm os.FileMode) {
	r.put(dst, entry{mode: modeRegular | uint32(perm.Perm()), data: data})
}

// AddFile adds host file src as dst, following symlinks, keeping its permission bits.
func (r *Initramfs) AddFile(dst, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("adding %s to the initramfs: %w", src, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("adding %s to the initramfs: not a regular file", src)
	}
	r.put(dst, entry{mode: modeRegular | uint32(fi.Mode().Perm()), src: src})
	return nil
}

// AddSymlink adds a symbolic link dst pointing at target.
func (r *Initramfs) AddSymlink(dst, target string) {
	r.put(dst, entry{mode: modeSymlink | 0o777, target: target})
}

// Has reports whether dst is in the archive.
func (r *Initramfs) Has(dst string) bool {
	_, ok := r.entries[clean(dst)]
	return ok
}

// IsStatic reports whether the ELF file at p has no program interpreter, i.e. runs
// without a dynamic loader.
func IsStatic(p string) (bool, error) {
	f, err := elf.Open(p)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// AddBusybox adds a static busybox as /bin/busybox with a symlink per applet at the path
// busybox itself names (--list-full), leaving alone paths already in the archive so that
// real tools added earlier win over applets of the same name.
func (r *Initramfs) AddBusybox(src string) error {
	static, err := IsStatic(src)
	if err != nil {
		return err
	}
	if !static {
		return fmt.Errorf("%w: %s is dynamically linked; install busybox-static", ErrUnavailable, src)
	}
	if err := r.AddFile("bin/busybox", src); err != nil {
		return err
	}
	out, err := exec.Command(src, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("%s --list-full: %w", src, err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if !r.Has(applet) {
			r.AddSymlink(applet, "/bin/busybox")
		}
	}
	return nil
}

// AddDynamic adds the ELF program or library src as dst together with every shared
// library ldd says it loads (and the dynamic loader), each at the path ldd printed.
func (r *Initramfs) AddDynamic(dst, src string) error {
	if err := r.AddFile(dst, src); err != nil {
		return err
	}
	// Not IsStatic: a shared object (an iptables extension that dlopen() loads) has no
	// program interpreter either, yet needs its libraries (libxt_statistic.so: libm).
	needed, err := neededLibraries(src)
	if err != nil || len(needed) == 0 {
		return err
	}
	libs, err := sharedLibraries(src)
	if err != nil {
		return err
	}
	for _, lib := range libs {
		if !r.Has(lib) {
			if err := r.AddFile(lib, lib); err != nil {
				return err
			}
		}
	}
	return nil
}

// neededLibraries returns the DT_NEEDED entries of the ELF file at p: none for a static
// executable.
func neededLibraries(p string) ([]string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("reading the dynamic section of %s: %w", p, err)
	}
	return libs, nil
}

// sharedLibraries parses `ldd file`: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)"
// and "/lib64/ld-linux-x86-64.so.2 (0x…)"; the vDSO has no path and is skipped.
func sharedLibraries(file string) ([]string, error) {
	out, err := exec.Command("ldd", file).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", file, err)
	}
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(line, "=> "); ok {
			line = after
		}
		p, _, _ := strings.Cut(line, " ")
		if strings.HasPrefix(p, "/") {
			libs = append(libs, p)
		} else if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("ldd %s: %s", file, line)
		}
	}
	return libs, nil
}

// AddIPTables adds iptables 1.8's two multi-binaries, nftMulti (xtables-nft-multi) and
// legacyMulti (xtables-legacy-multi), under /usr/sbin with every name they answer to
// (iptables-nft-save, ip6tables-legacy-restore, ...), the plain names pointing at the nft
// backend as on Debian 12, and the match and target extensions they dlopen() (which ldd
// of the binaries cannot see), with the libraries of all of them.
func (r *Initramfs) AddIPTables(nftMulti, legacyMulti string) error {
	for dst, src := range map[string]string{"xtables-nft-multi": nftMulti, "xtables-legacy-multi": legacyMulti} {
		if err := r.AddDynamic("usr/sbin/"+dst, src); err != nil {
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
	const extDir = "/usr/lib/x86_64-linux-gnu/xtables"
	exts, _ := filepath.Glob(extDir + "/*.so")
	if len(exts) == 0 {
		return fmt.Errorf("%w: no iptables extensions in %s", ErrUnavailable, extDir)
	}
	for _, e := range exts {
		if err := r.AddDynamic(e, e); err != nil {
			return err
		}
	}
	return nil
}

// AddModules adds the modules at their place under /lib/modules/<release>, a modules.dep
// listing only them (so the guest's modprobe works on the subset), and /etc/vm-modules
// naming their paths in load order, for an init script to insmod.
func (r *Initramfs) AddModules(k *Kernel, mods []Module) error {
	base := path.Join("lib/modules", k.Release)
	var dep, order strings.Builder
	for _, m := range mods {
		if err := r.AddFile(path.Join(base, m.Path), filepath.Join(k.ModulesDir, m.Path)); err != nil {
			return err
		}
		fmt.Fprintf(&dep, "%s:", m.Path)
		for _, d := range m.Deps {
			fmt.Fprintf(&dep, " %s", d)
		}
		dep.WriteByte('\n')
		fmt.Fprintf(&order, "/%s/%s\n", base, m.Path)
	}
	r.AddBytes(path.Join(base, "modules.dep"), []byte(dep.String()), 0o644)
	r.AddBytes("etc/vm-modules", []byte(order.String()), 0o644)
	return nil
}

// Write writes the archive to file as newc cpio, gzipped when file ends in ".gz". The
// kernel takes either; uncompressed is the faster choice for a one-off guest: no
// compression on the host (seconds under -race) and no decompression in an emulated
// guest, at the cost of the archive's size in guest memory during boot.
func (r *Initramfs) Write(file string) (err error) {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("creating initramfs: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("writing initramfs: %w", cerr)
		}
	}()
	var w io.Writer = f
	var zw *gzip.Writer
	if strings.HasSuffix(file, ".gz") {
		// BestSpeed: the kube-proxy binary dominates the size and the ratio gained by
		// harder compression is not worth seconds on every run.
		zw, err = gzip.NewWriterLevel(f, gzip.BestSpeed)
		if err != nil {
			return err
		}
		w = zw
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	names := make([]string, 0, len(r.entries))
	for p := range r.entries {
		names = append(names, p)
	}
	// Sorted order puts every directory before what it holds.
	sort.Strings(names)
	ino := uint32(1)
	for _, p := range names {
		if err := r.writeEntry(bw, p, r.entries[p], ino); err != nil {
			return fmt.Errorf("writing %s into the initramfs: %w", p, err)
		}
		ino++
	}
	if err := writeHeader(bw, "TRAILER!!!", 0, 0, 0); err != nil {
		return fmt.Errorf("writing initramfs: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing initramfs: %w", err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return fmt.Errorf("writing initramfs: %w", err)
		}
	}
	return nil
}

func (r *Initramfs) writeEntry(w io.Writer, name string, e entry, ino uint32) error {
	switch e.mode &^ 0o7777 {
	case modeDir:
		return writeHeader(w, name, e.mode, ino, 0)
	case modeSymlink:
		if err := writeHeader(w, name, e.mode, ino, len(e.target)); err != nil {
			return err
		}
		return writeData(w, []byte(e.target))
	}
	if e.src == "" {
		if err := writeHeader(w, name, e.mode, ino, len(e.data)); err != nil {
			return err
		}
		return writeData(w, e.data)
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := writeHeader(w, name, e.mode, ino, int(fi.Size())); err != nil {
		return err
	}
	n, err := io.Copy(w, f)
	if err != nil {
		return err
	}
	if n != fi.Size() {
		return fmt.Errorf("%s changed size while being archived", e.src)
	}
	return pad(w, int(n))
}

// writeHeader writes a newc header ("070701", thirteen 8-digit hex fields) and the
// NUL-terminated name padded to a multiple of four bytes.
func writeHeader(w io.Writer, name string, mode, ino uint32, size int) error {
	nlink := 1
	if mode&^0o7777 == modeDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	if _, err := io.WriteString(w, hdr+name+"\x00"); err != nil {
		return err
	}
	return pad(w, len(hdr)+len(name)+1)
}

func writeData(w io.Writer, data []byte) error {
	if _, err := w.Write(data); err != nil {
		return err
	}
	return pad(w, len(data))
}

func pad(w io.Writer, n int) error {
	if r := n % 4; r != 0 {
		_, err := w.Write(make([]byte, 4-r))
		return err
	}
	return nil
}
