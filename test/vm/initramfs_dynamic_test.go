package vm

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestAddDynamicSharedObject: a dlopen()ed shared object brings its libraries along, as
// an executable does. An iptables extension without libm made every iptables mode's
// statistic match fail in the guest ("Couldn't load match `statistic'").
func TestAddDynamicSharedObject(t *testing.T) {
	if _, err := exec.LookPath("ldd"); err != nil {
		t.Skip("needs ldd")
	}
	ext := "/usr/lib/x86_64-linux-gnu/xtables/libxt_statistic.so"
	needed, err := neededLibraries(ext)
	if err != nil {
		t.Skipf("no iptables extension to test with: %v", err)
	}
	libs, err := sharedLibraries(ext)
	if err != nil {
		t.Fatal(err)
	}
	r := NewInitramfs()
	if err := r.AddDynamic(ext, ext); err != nil {
		t.Fatal(err)
	}
	for _, lib := range libs {
		if !r.Has(lib) {
			t.Errorf("AddDynamic(%s) left out %s (it needs %v)", ext, lib, needed)
		}
	}
	if len(libs) == 0 {
		t.Errorf("ldd names no library of %s, which needs %v", ext, needed)
	}
	// A static executable needs nothing and gets nothing.
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return
	}
	if static, _ := IsStatic(bb); !static {
		return
	}
	r = NewInitramfs()
	if err := r.AddDynamic("bin/busybox", bb); err != nil {
		t.Fatal(err)
	}
	n := 0
	for p := range r.entries {
		if filepath.Ext(p) == ".so" || filepath.Base(p) == "libc.so.6" {
			n++
		}
	}
	if n != 0 {
		t.Errorf("a static busybox brought %d libraries", n)
	}
}
