//go:build linux

package iptables

import (
	"encoding/binary"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseGeneration(t *testing.T) {
	attr := func(typ uint16, val []byte) []byte {
		b := make([]byte, unix.NLA_HDRLEN, unix.NLA_HDRLEN+len(val)+3)
		binary.NativeEndian.PutUint16(b[0:], uint16(unix.NLA_HDRLEN+len(val)))
		binary.NativeEndian.PutUint16(b[2:], typ)
		b = append(b, val...)
		for len(b)%unix.NLA_ALIGNTO != 0 {
			b = append(b, 0)
		}
		return b
	}
	genmsg := []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 7}
	for _, tc := range []struct {
		name    string
		data    []byte
		want    uint32
		wantErr bool
	}{
		{"id first", append(append(genmsg, attr(unix.NFTA_GEN_ID, []byte{0, 0, 1, 7})...), attr(unix.NFTA_GEN_PROC_PID, []byte{0, 0, 0, 1})...), 263, false},
		{"id after a padded name", append(append(genmsg, attr(unix.NFTA_GEN_PROC_NAME, []byte("nft\x00x"))...), attr(unix.NFTA_GEN_ID, []byte{1, 0, 0, 0})...), 1 << 24, false},
		{"no id", append(genmsg, attr(unix.NFTA_GEN_PROC_PID, []byte{0, 0, 0, 1})...), 0, true},
		{"short", []byte{1, 2}, 0, true},
		{"bad attribute length", append(genmsg, 200, 0, 1, 0), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseGeneration(tc.data)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseGeneration = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestNFTablesGeneration reads the generation in a new network namespace around a
// commit: it grows with the commit and stays put without one.
func TestNFTablesGeneration(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a new network namespace, CAP_NET_ADMIN for nfnetlink)")
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		t.Skip("needs nft to commit a transaction")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread enters a namespace of its own and is never given back to the
		// scheduler (no UnlockOSThread), so it dies with the goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		g0, err := NFTablesGeneration()
		if err != nil {
			t.Errorf("first read: %v", err)
			return
		}
		if g, err := NFTablesGeneration(); err != nil || g != g0 {
			t.Errorf("second read without a commit: %d, %v; want %d", g, err, g0)
		}
		// A child forked from this thread is in its namespace.
		if out, err := exec.Command(nft, "add", "table", "ip", "kp-generation-test").CombinedOutput(); err != nil {
			t.Errorf("nft add table: %v: %s", err, out)
			return
		}
		if g, err := NFTablesGeneration(); err != nil || g == g0 {
			t.Errorf("read after a commit: %d, %v; want other than %d", g, err, g0)
		}
	}()
	<-done
}
