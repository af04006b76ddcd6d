//go:build linux

package ebpf

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnifiedCgroupRoot: the default cgroup is a cgroup v2 filesystem, the pure-v2
// mount point when that is one and the hybrid one otherwise.
func TestUnifiedCgroupRoot(t *testing.T) {
	root, err := UnifiedCgroupRoot()
	var v2, hybrid unix.Statfs_t
	v2Err, hybridErr := unix.Statfs(cgroupV2Root, &v2), unix.Statfs(DefaultCgroupPath, &hybrid)
	isV2 := v2Err == nil && v2.Type == unix.CGROUP2_SUPER_MAGIC
	isHybrid := hybridErr == nil && hybrid.Type == unix.CGROUP2_SUPER_MAGIC
	want := ""
	switch {
	case isV2:
		want = cgroupV2Root
	case isHybrid:
		want = DefaultCgroupPath
	}
	if want == "" {
		if err == nil {
			t.Errorf("no cgroup v2 mount, but UnifiedCgroupRoot returned %q", root)
		}
		t.Skipf("no cgroup v2 hierarchy on this host: %v", err)
	}
	if err != nil || root != want {
		t.Errorf("UnifiedCgroupRoot() = %q, %v; want %q", root, err, want)
	}
	if got := (Config{}).withDefaults().CgroupPath; got != want {
		t.Errorf("default Config cgroup path %q, want %q", got, want)
	}
}
