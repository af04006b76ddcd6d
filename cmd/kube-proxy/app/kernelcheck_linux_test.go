//go:build linux

package app

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHostKernel reads a fake root: loaded, built-in and installable modules count,
// compressed names included; without modules.dep only loaded ones are known.
func TestHostKernel(t *testing.T) {
	write := func(root, p, s string) {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	full := t.TempDir()
	write(full, "proc/sys/kernel/osrelease", "6.12.117+deb12-cloud-amd64\n")
	write(full, "proc/modules", "nf_tables 348160 0 - Live 0x0\nip_vs 200000 0 - Live 0x0\n")
	write(full, "lib/modules/6.12.117+deb12-cloud-amd64/modules.builtin", "kernel/net/netfilter/x_tables.ko\n")
	write(full, "lib/modules/6.12.117+deb12-cloud-amd64/modules.dep",
		"kernel/net/netfilter/nft_numgen.ko.xz: kernel/net/netfilter/nf_tables.ko.xz\nkernel/net/netfilter/nft_fib-ipv4.ko.zst:\n")
	write(full, "sys/module/xt_mark/parameters/x", "")
	noBuiltin := t.TempDir()
	write(noBuiltin, "proc/sys/kernel/osrelease", "6.1.0-custom\n")
	write(noBuiltin, "proc/modules", "")
	write(noBuiltin, "lib/modules/6.1.0-custom/modules.dep", "kernel/net/netfilter/nft_numgen.ko:\n")
	bare := t.TempDir()
	write(bare, "proc/sys/kernel/osrelease", "6.18.44-fc\n")
	write(bare, "proc/modules", "nf_tables 1 0 - Live 0x0\n")

	for _, tc := range []struct {
		root, module string
		want         bool
		wantErr      bool
	}{
		{full, "nf_tables", true, false},    // loaded
		{full, "x_tables", true, false},     // built in
		{full, "nft_numgen", true, false},   // installable, .ko.xz
		{full, "nft_fib_ipv4", true, false}, // installable, dash in the file name
		{full, "xt_mark", true, false},      // in /sys/module
		{full, "nft_masq", false, false},    // absent: known to be missing
		{noBuiltin, "nft_numgen", true, false},
		{noBuiltin, "nft_masq", false, true}, // may be built in: unknown, not missing
		{bare, "nf_tables", true, false},
		{bare, "nft_masq", false, true}, // no modules.dep: unknown
	} {
		h := &hostKernel{root: tc.root}
		got, err := h.HasModule(tc.module)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: HasModule(%s) = %v, %v; want %v, error %v", filepath.Base(tc.root), tc.module, got, err, tc.want, tc.wantErr)
		}
	}
	h := &hostKernel{root: full}
	if r, err := h.Release(); err != nil || r != "6.12.117+deb12-cloud-amd64" {
		t.Errorf("Release() = %q, %v", r, err)
	}
}
