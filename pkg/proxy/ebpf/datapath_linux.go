//go:build linux

package ebpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

const (
	// DefaultPinPath is where the maps and the program links are pinned, so that
	// they outlive a restart of kube-proxy.
	DefaultPinPath = "/sys/fs/bpf/kube-proxy-socketlb"
	// DefaultCgroupPath is the root of the cgroup v2 hierarchy on a hybrid host.
	DefaultCgroupPath = "/sys/fs/cgroup/unified"
	// cgroupV2Root is where a host with only the unified hierarchy mounts it.
	cgroupV2Root = "/sys/fs/cgroup"
)

// UnifiedCgroupRoot returns the root of the unified (cgroup v2) hierarchy: the
// default cgroup to attach to. A host running cgroup v2 alone mounts it at
// /sys/fs/cgroup, a hybrid host at /sys/fs/cgroup/unified; the first one that is a
// cgroup v2 filesystem wins.
func UnifiedCgroupRoot() (string, error) {
	for _, p := range []string{cgroupV2Root, DefaultCgroupPath} {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return p, nil
		}
	}
	return "", fmt.Errorf("no cgroup v2 hierarchy mounted at %s or %s (mount -t cgroup2 none %s, or give the cgroup path)", cgroupV2Root, DefaultCgroupPath, DefaultCgroupPath)
}

// Config says where to attach and pin.
type Config struct {
	// CgroupPath is the cgroup v2 directory whose sockets (and its descendants') are
	// load-balanced. Default UnifiedCgroupRoot().
	CgroupPath string
	// PinPath is a directory on a bpf filesystem. Default DefaultPinPath.
	PinPath string
}

func (c Config) withDefaults() Config {
	if c.CgroupPath == "" {
		// Left at DefaultCgroupPath when there is no root: CheckKernel then names
		// the path it could not use.
		c.CgroupPath = DefaultCgroupPath
		if root, err := UnifiedCgroupRoot(); err == nil {
			c.CgroupPath = root
		}
	}
	if c.PinPath == "" {
		c.PinPath = DefaultPinPath
	}
	return c
}

// Datapath is the loaded maps and attached programs.
type Datapath struct {
	objs  socketlbObjects
	links []link.Link
	// Adopted is what the pinned maps held at Open (a restart), for NewBackend.
	Adopted *Adopted
}

// hookTypes names each hook (its link's pin name is "link_" + name) and its attach
// type, in the order hooks() lists the programs.
var hookTypes = []struct {
	name string
	typ  ebpf.AttachType
}{
	{"connect4", ebpf.AttachCGroupInet4Connect},
	{"connect6", ebpf.AttachCGroupInet6Connect},
	{"sendmsg4", ebpf.AttachCGroupUDP4Sendmsg},
	{"sendmsg6", ebpf.AttachCGroupUDP6Sendmsg},
	{"recvmsg4", ebpf.AttachCGroupUDP4Recvmsg},
	{"recvmsg6", ebpf.AttachCGroupUDP6Recvmsg},
	{"getpeername4", ebpf.AttachCgroupInet4GetPeername},
	{"getpeername6", ebpf.AttachCgroupInet6GetPeername},
}

// hooks names each program's attach type and pin name.
func (d *Datapath) hooks() []struct {
	name string
	prog *ebpf.Program
	typ  ebpf.AttachType
} {
	p := &d.objs.socketlbPrograms
	progs := []*ebpf.Program{p.SockConnect4, p.SockConnect6, p.SockSendmsg4, p.SockSendmsg6,
		p.SockRecvmsg4, p.SockRecvmsg6, p.SockGetpeername4, p.SockGetpeername6}
	out := make([]struct {
		name string
		prog *ebpf.Program
		typ  ebpf.AttachType
	}, len(hookTypes))
	for i, h := range hookTypes {
		out[i].name, out[i].prog, out[i].typ = h.name, progs[i], h.typ
	}
	return out
}

// AttachedPrograms counts the programs attached to the cgroup at cgroupPath for each
// hook the socket load balancer uses (by hook name: connect4, sendmsg6, ...), whoever
// attached them; a hook without any is absent. It lets a caller check that a cleanup
// left nothing behind.
func AttachedPrograms(cgroupPath string) (map[string]int, error) {
	f, err := os.Open(cgroupPath)
	if err != nil {
		return nil, fmt.Errorf("cgroup path %q: %w", cgroupPath, err)
	}
	defer f.Close()
	out := map[string]int{}
	for _, h := range hookTypes {
		res, err := link.QueryPrograms(link.QueryOptions{Target: int(f.Fd()), Attach: h.typ})
		if err != nil {
			return nil, fmt.Errorf("querying the %s programs of cgroup %q: %w", h.name, cgroupPath, err)
		}
		if n := len(res.Programs); n > 0 {
			out[h.name] = n
		}
	}
	return out, nil
}

// Pinned lists the names pinned under pinPath (default DefaultPinPath): the maps and
// the program links a run left for the next one. Nothing pinned (no directory) is an
// empty list.
func Pinned(pinPath string) ([]string, error) {
	if pinPath == "" {
		pinPath = DefaultPinPath
	}
	entries, err := os.ReadDir(pinPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading pin path %q: %w", pinPath, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

// CheckKernel reports the first kernel feature the socket load balancer needs and
// this kernel lacks, by name.
func CheckKernel(cfg Config) error {
	cfg = cfg.withDefaults()
	if err := rlimit.RemoveMemlock(); err != nil {
		return fmt.Errorf("raising RLIMIT_MEMLOCK for BPF maps: %w", err)
	}
	if err := features.HaveProgramType(ebpf.CGroupSockAddr); err != nil {
		return fmt.Errorf("kernel lacks cgroup socket-address BPF programs (CONFIG_BPF_SYSCALL, CONFIG_CGROUP_BPF): %w", err)
	}
	if err := features.HaveMapType(ebpf.LRUHash); err != nil {
		return fmt.Errorf("kernel lacks LRU hash BPF maps: %w", err)
	}
	for _, h := range []asm.BuiltinFunc{asm.FnGetNetnsCookie, asm.FnGetSocketCookie, asm.FnSetRetval} {
		if err := features.HaveProgramHelper(ebpf.CGroupSockAddr, h); err != nil {
			return fmt.Errorf("kernel lacks BPF helper %s for cgroup socket-address programs: %w", h, err)
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(cfg.CgroupPath, &st); err != nil {
		return fmt.Errorf("cgroup path %q: %w", cfg.CgroupPath, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("cgroup path %q is not on a cgroup v2 filesystem (type %#x)", cfg.CgroupPath, st.Type)
	}
	dir := filepath.Dir(cfg.PinPath)
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("bpf filesystem for pin path %q: %w", cfg.PinPath, err)
	}
	if st.Type != unix.BPF_FS_MAGIC {
		return fmt.Errorf("pin path %q: %s is not a bpf filesystem (mount -t bpf bpf %s)", cfg.PinPath, dir, dir)
	}
	return nil
}

// Open loads the programs, pins (or re-adopts) the maps and attaches the programs to
// the cgroup. A program already attached by a previous run (its link pinned) is
// replaced in place, atomically, rather than detached, so sockets never see a moment
// without translation. On error nothing new stays attached.
func Open(cfg Config) (*Datapath, error) {
	cfg = cfg.withDefaults()
	if err := CheckKernel(cfg); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.PinPath, 0o700); err != nil {
		return nil, fmt.Errorf("creating pin path %q: %w", cfg.PinPath, err)
	}
	d := &Datapath{}
	err := loadSocketlbObjects(&d.objs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: cfg.PinPath}})
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("loading socket load-balancing programs: %+v", verr)
		}
		return nil, fmt.Errorf("loading socket load-balancing programs (pinned maps at %q of another layout? run cleanup): %w", cfg.PinPath, err)
	}
	adopted, err := d.readAdopted()
	if err != nil {
		d.objs.Close()
		return nil, err
	}
	d.Adopted = adopted
	var created []link.Link
	fail := func(err error) (*Datapath, error) {
		for _, l := range created {
			_ = l.Unpin()
			_ = l.Close()
		}
		for _, l := range d.links {
			_ = l.Close()
		}
		d.objs.Close()
		return nil, err
	}
	for _, h := range d.hooks() {
		pin := filepath.Join(cfg.PinPath, "link_"+h.name)
		if l, err := link.LoadPinnedLink(pin, nil); err == nil {
			if err := sameCgroup(l, cfg.CgroupPath); err != nil {
				_ = l.Close()
				return fail(fmt.Errorf("pinned link %q: %w", pin, err))
			}
			if err := l.Update(h.prog); err != nil {
				_ = l.Close()
				return fail(fmt.Errorf("replacing the program of pinned link %q: %w", pin, err))
			}
			d.links = append(d.links, l)
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return fail(fmt.Errorf("loading pinned link %q: %w", pin, err))
		}
		l, err := link.AttachCgroup(link.CgroupOptions{Path: cfg.CgroupPath, Attach: h.typ, Program: h.prog})
		if err != nil {
			return fail(fmt.Errorf("attaching %s to cgroup %q: %w", h.name, cfg.CgroupPath, err))
		}
		created = append(created, l)
		if err := l.Pin(pin); err != nil {
			return fail(fmt.Errorf("pinning link %q: %w", pin, err))
		}
		d.links = append(d.links, l)
	}
	return d, nil
}

// sameCgroup checks that a pinned link is attached to the cgroup at path: a restart
// with another cgroup path must not keep programming the old one silently.
func sameCgroup(l link.Link, path string) error {
	info, err := l.Info()
	if err != nil {
		return fmt.Errorf("reading link info: %w", err)
	}
	cg := info.Cgroup()
	if cg == nil {
		return fmt.Errorf("not a cgroup link")
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Errorf("cgroup path %q: %w", path, err)
	}
	// On cgroup v2 a cgroup's id is its directory's inode number.
	if cg.CgroupId != st.Ino {
		return fmt.Errorf("attached to cgroup id %d, not to %q (id %d): run cleanup first to move the socket load balancer", cg.CgroupId, path, st.Ino)
	}
	return nil
}

// readAdopted reads the frontends and sets a previous run left in pinned maps.
func (d *Datapath) readAdopted() (*Adopted, error) {
	a := &Adopted{Frontends: map[feKey]uint32{}, Sets: map[uint32]setVal{}}
	var k feKey
	var v feVal
	it := d.objs.Frontends.Iterate()
	for it.Next(&k, &v) {
		a.Frontends[k] = v.SetID
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading pinned frontends: %w", err)
	}
	var id uint32
	var sv setVal
	it = d.objs.Sets.Iterate()
	for it.Next(&id, &sv) {
		a.Sets[id] = sv
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading pinned sets: %w", err)
	}
	if len(a.Frontends) == 0 && len(a.Sets) == 0 {
		return nil, nil
	}
	return a, nil
}

// tolerantMap deletes idempotently: a retried sync may delete a key again.
type tolerantMap struct{ *ebpf.Map }

func (m tolerantMap) Delete(key any) error {
	if err := m.Map.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	return nil
}

// Maps returns the maps for NewBackend.
func (d *Datapath) Maps() *Maps {
	m := &d.objs.socketlbMaps
	return &Maps{Frontends: tolerantMap{m.Frontends}, Sets: tolerantMap{m.Sets}, Backends: tolerantMap{m.Backends}}
}

// Close releases this process's handles. The programs stay attached and the maps
// pinned, translating with their last contents, for the next run to adopt.
func (d *Datapath) Close() error {
	var errs []error
	for _, l := range d.links {
		errs = append(errs, l.Close())
	}
	errs = append(errs, d.objs.Close())
	return errors.Join(errs...)
}

// Cleanup detaches the programs pinned under pinPath (default DefaultPinPath) and
// removes the pinned maps and the directory. A missing directory is not an error.
func Cleanup(pinPath string) error {
	if pinPath == "" {
		pinPath = DefaultPinPath
	}
	entries, err := os.ReadDir(pinPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading pin path %q: %w", pinPath, err)
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(pinPath, e.Name())
		if l, err := link.LoadPinnedLink(p, nil); err == nil {
			// A cgroup link detaches when its last reference goes: the pin and
			// this handle.
			errs = append(errs, l.Unpin(), l.Close())
			continue
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, fmt.Errorf("removing pinned %q: %w", p, err))
		}
	}
	if err := os.Remove(pinPath); err != nil {
		errs = append(errs, fmt.Errorf("removing pin path %q: %w", pinPath, err))
	}
	return errors.Join(errs...)
}
