package vm

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// readNewc parses a newc archive (gzipped if file ends in .gz) into name -> (mode, contents), stopping at the
// trailer; it is the reader side of Initramfs.Write, kept in the test so that the format is
// checked by a second, independent implementation.
func readNewc(t *testing.T, file string) map[string]struct {
	mode uint32
	data string
} {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var rd io.Reader = f
	if strings.HasSuffix(file, ".gz") {
		if rd, err = gzip.NewReader(f); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]struct {
		mode uint32
		data string
	}{}
	align := func(n int) int { return (n + 3) &^ 3 }
	off := 0
	for {
		if off+110 > len(raw) || string(raw[off:off+6]) != "070701" {
			t.Fatalf("bad newc header at offset %d", off)
		}
		field := func(i int) int {
			v, err := strconv.ParseUint(string(raw[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatalf("header field %d at offset %d: %v", i, off, err)
			}
			return int(v)
		}
		mode, size, namesize := uint32(field(1)), field(6), field(11)
		name := string(raw[off+110 : off+110+namesize-1])
		dataStart := align(off + 110 + namesize)
		if name == "TRAILER!!!" {
			return out
		}
		out[name] = struct {
			mode uint32
			data string
		}{mode, string(raw[dataStart : dataStart+size])}
		off = align(dataStart + size)
	}
}

func TestInitramfsWrite(t *testing.T) {
	for _, name := range []string{"initramfs.cpio", "initramfs.gz"} {
		t.Run(name, func(t *testing.T) { testInitramfsWrite(t, name) })
	}
}

func testInitramfsWrite(t *testing.T, archive string) {
	dir := t.TempDir()
	src := filepath.Join(dir, "tool")
	// Odd lengths exercise the 4-byte padding after names and data.
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho hi\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	r := NewInitramfs()
	r.AddBytes("init", []byte("abc"), 0o755)
	if err := r.AddFile("usr/local/bin/tool", src); err != nil {
		t.Fatal(err)
	}
	r.AddSymlink("bin/sh", "/bin/busybox")
	out := filepath.Join(dir, archive)
	if err := r.Write(out); err != nil {
		t.Fatal(err)
	}
	got := readNewc(t, out)
	for _, c := range []struct {
		name string
		mode uint32
		data string
	}{
		{"init", modeRegular | 0o755, "abc"},
		{"usr/local/bin/tool", modeRegular | 0o750, "#!/bin/sh\necho hi\n"},
		{"bin/sh", modeSymlink | 0o777, "/bin/busybox"},
		{"usr/local/bin", modeDir | 0o755, ""},
		{"proc", modeDir | 0o755, ""},
	} {
		e, ok := got[c.name]
		if !ok {
			t.Errorf("%s missing from the archive", c.name)
			continue
		}
		if e.mode != c.mode || e.data != c.data {
			t.Errorf("%s: got mode %o data %q, want mode %o data %q", c.name, e.mode, e.data, c.mode, c.data)
		}
	}

	// The format is the one cpio(1) reads, where cpio is installed.
	cpio, err := exec.LookPath("cpio")
	if err != nil {
		t.Log("cpio not installed; skipping the cross-check with cpio -t")
		return
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var in io.Reader = bytes.NewReader(data)
	if strings.HasSuffix(archive, ".gz") {
		if in, err = gzip.NewReader(in); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(cpio, "-t", "--quiet")
	cmd.Stdin = in
	list, err := cmd.Output()
	if err != nil {
		t.Fatalf("cpio -t: %v", err)
	}
	for _, name := range []string{"init", "usr/local/bin/tool", "bin/sh"} {
		if !strings.Contains("\n"+string(list), "\n"+name+"\n") {
			t.Errorf("cpio -t does not list %s:\n%s", name, list)
		}
	}
}

func TestParseCheck(t *testing.T) {
	for _, c := range []struct {
		line string
		want Result
		ok   bool
	}{
		{"VMCHECK good/connect PASS answers abab", Result{"good/connect", true, "answers abab"}, true},
		{"[   3.1] ok VMCHECK x FAIL", Result{"x", false, ""}, true},
		{"VMCHECK x MAYBE y", Result{}, false},
		{"VMLOG something", Result{}, false},
		{"VMCHECK lonely", Result{}, false},
	} {
		got, ok := parseCheck(c.line)
		if ok != c.ok || got != c.want {
			t.Errorf("parseCheck(%q) = %+v, %v; want %+v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

func TestModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/net/netfilter/ipvs/ip_vs_rr.ko":    "ip_vs_rr",
		"kernel/net/netfilter/nf_nat-foo.ko.xz":    "nf_nat_foo",
		"kernel/net/ipv4/netfilter/iptable_nat.ko": "iptable_nat",
	} {
		if got := moduleName(in); got != want {
			t.Errorf("moduleName(%q) = %q, want %q", in, got, want)
		}
	}
}
