//go:build linux

package nfacct

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// fakeTransport is an in-memory nfacct table speaking the wire format.
type fakeTransport struct {
	counters map[string]*Counter
	order    []string
	// failWith, when set, is returned for every request.
	failWith error
	// interrupts makes that many dumps report an interrupted dump.
	interrupts int
	dumps      int
	requests   []string
}

func newFakeTransport() *fakeTransport {
	return &fakeTransport{counters: map[string]*Counter{}}
}

func (f *fakeTransport) do(cmd int, flags uint16, name string) ([][]byte, error) {
	f.requests = append(f.requests, fmt.Sprintf("%d/%q", cmd, name))
	if f.failWith != nil {
		return nil, f.failWith
	}
	switch {
	case cmd == cmdNew:
		if _, ok := f.counters[name]; ok {
			return nil, syscall.EBUSY
		}
		f.counters[name] = &Counter{Name: name}
		f.order = append(f.order, name)
		return nil, nil
	case cmd == cmdGet && flags&unix.NLM_F_DUMP != 0:
		f.dumps++
		var out [][]byte
		for _, n := range f.order {
			out = append(out, encode(*f.counters[n]))
		}
		if f.interrupts > 0 {
			f.interrupts--
			return out, unix.EINTR
		}
		return out, nil
	case cmd == cmdGet:
		c, ok := f.counters[name]
		if !ok {
			return nil, syscall.ENOENT
		}
		return [][]byte{encode(*c)}, nil
	}
	return nil, syscall.EINVAL
}

func TestClient(t *testing.T) {
	tooLong := "0123456789012345678901234567890x"
	type step struct {
		op      string // ensure, add, get, list
		name    string
		wantErr error
		want    any
	}
	tests := []struct {
		name      string
		setup     func(*fakeTransport)
		steps     []step
		wantDumps int
	}{
		{
			name: "add then get",
			steps: []step{
				{op: "add", name: "a"},
				{op: "get", name: "a", want: &Counter{Name: "a"}},
				{op: "add", name: "a", wantErr: ErrObjectAlreadyExists},
			},
		},
		{
			name:  "get missing",
			steps: []step{{op: "get", name: "missing", wantErr: ErrObjectNotFound}},
		},
		{
			name: "ensure creates once",
			steps: []step{
				{op: "ensure", name: "a"},
				{op: "ensure", name: "a"},
				{op: "list", want: []*Counter{{Name: "a"}}},
			},
			wantDumps: 1,
		},
		{
			name: "name validation",
			steps: []step{
				{op: "add", name: "", wantErr: ErrEmptyName},
				{op: "add", name: tooLong, wantErr: ErrNameExceedsMaxLength},
				{op: "get", name: tooLong, wantErr: ErrNameExceedsMaxLength},
				{op: "ensure", name: tooLong, wantErr: ErrNameExceedsMaxLength},
			},
		},
		{
			name:  "kernel error is unexpected",
			setup: func(f *fakeTransport) { f.failWith = syscall.EPERM },
			steps: []step{
				{op: "get", name: "a", wantErr: ErrUnexpected},
				{op: "ensure", name: "a", wantErr: ErrUnexpected},
				{op: "list", wantErr: ErrUnexpected},
			},
			wantDumps: 0,
		},
		{
			name: "list retries interrupted dumps",
			setup: func(f *fakeTransport) {
				f.counters["x"] = &Counter{Name: "x", Packets: 3, Bytes: 30}
				f.order = []string{"x"}
				f.interrupts = 2
			},
			steps:     []step{{op: "list", want: []*Counter{{Name: "x", Packets: 3, Bytes: 30}}}},
			wantDumps: 3,
		},
		{
			name: "list returns partial result after too many interrupts",
			setup: func(f *fakeTransport) {
				f.counters["x"] = &Counter{Name: "x"}
				f.order = []string{"x"}
				f.interrupts = 100
			},
			steps:     []step{{op: "list", want: []*Counter{{Name: "x"}}, wantErr: unix.EINTR}},
			wantDumps: 5,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ft := newFakeTransport()
			if tc.setup != nil {
				tc.setup(ft)
			}
			c := &client{t: ft}
			for i, s := range tc.steps {
				var got any
				var err error
				switch s.op {
				case "ensure":
					err = c.Ensure(s.name)
				case "add":
					err = c.Add(s.name)
				case "get":
					var ctr *Counter
					ctr, err = c.Get(s.name)
					if ctr != nil {
						got = ctr
					}
				case "list":
					var l []*Counter
					l, err = c.List()
					if l != nil {
						got = l
					}
				}
				if s.wantErr == nil && err != nil {
					t.Fatalf("step %d %s(%q): unexpected error %v", i, s.op, s.name, err)
				}
				if s.wantErr != nil && !errors.Is(err, s.wantErr) {
					t.Fatalf("step %d %s(%q): error %v, want %v", i, s.op, s.name, err, s.wantErr)
				}
				if s.want != nil {
					if diff := cmp.Diff(s.want, got); diff != "" {
						t.Errorf("step %d %s(%q) (-want +got):\n%s", i, s.op, s.name, diff)
					}
				}
			}
			if ft.dumps != tc.wantDumps {
				t.Errorf("dumps = %d, want %d", ft.dumps, tc.wantDumps)
			}
		})
	}
}

// inPrivateNetns runs fn on a thread moved into a fresh network namespace.
// The thread stays locked, so the runtime discards it when fn returns. fn
// runs off the test goroutine, so it may only use t.Error*/t.Log; it returns
// a non-empty reason to skip the test.
func inPrivateNetns(t *testing.T, fn func() (skip string)) {
	t.Helper()
	if unix.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	var skip string
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			skip = fmt.Sprintf("cannot create a network namespace: %v", err)
			return
		}
		skip = fn()
	}()
	<-done
	if skip != "" {
		t.Skip(skip)
	}
}

func TestKernel(t *testing.T) {
	inPrivateNetns(t, func() string {
		c, err := New()
		if errors.Is(err, ErrNotSupported) {
			return fmt.Sprintf("kernel lacks nfnetlink_acct: %v", err)
		}
		if err != nil {
			t.Errorf("New: %v", err)
			return ""
		}
		if _, err := c.Get("absent"); !errors.Is(err, ErrObjectNotFound) {
			t.Errorf("Get(absent) = %v, want ErrObjectNotFound", err)
		}
		names := []string{"ct_state_invalid_dropped_pkts", "localhost_nps_accepted_pkts", "0123456789012345678901234567890"}
		for _, n := range names {
			if err := c.Ensure(n); err != nil {
				t.Errorf("Ensure(%q): %v", n, err)
				return ""
			}
			if err := c.Ensure(n); err != nil {
				t.Errorf("second Ensure(%q): %v", n, err)
			}
		}
		if err := c.Add(names[0]); !errors.Is(err, ErrObjectAlreadyExists) {
			t.Errorf("Add(existing) = %v, want ErrObjectAlreadyExists", err)
		}
		got, err := c.Get(names[1])
		if err != nil {
			t.Errorf("Get: %v", err)
		} else if diff := cmp.Diff(&Counter{Name: names[1]}, got); diff != "" {
			t.Errorf("Get (-want +got):\n%s", diff)
		}
		list, err := c.List()
		if err != nil {
			t.Errorf("List: %v", err)
			return ""
		}
		var listed []string
		for _, ctr := range list {
			listed = append(listed, ctr.Name)
		}
		if diff := cmp.Diff(names, listed); diff != "" {
			t.Errorf("List names (-want +got):\n%s", diff)
		}
		return ""
	})
}

// TestKernelCounting checks that packets matched by an iptables nfacct rule
// are read back with the right byte order.
func TestKernelCounting(t *testing.T) {
	ipt, err := exec.LookPath("iptables")
	if err != nil {
		t.Skip("iptables binary not found")
	}
	ipCmd, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("ip binary not found")
	}
	const name = "kp_test_counter"
	const packets = 3
	inPrivateNetns(t, func() string {
		c, err := New()
		if errors.Is(err, ErrNotSupported) {
			return fmt.Sprintf("kernel lacks nfnetlink_acct: %v", err)
		}
		if err != nil {
			t.Errorf("New: %v", err)
			return ""
		}
		if err := c.Ensure(name); err != nil {
			t.Errorf("Ensure: %v", err)
			return ""
		}
		// Commands exec'd from this locked thread inherit its namespace.
		if out, err := exec.Command(ipCmd, "link", "set", "lo", "up").CombinedOutput(); err != nil {
			return fmt.Sprintf("cannot bring lo up: %v: %s", err, out)
		}
		sink, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Errorf("listen: %v", err)
			return ""
		}
		defer sink.Close()
		port := fmt.Sprint(sink.LocalAddr().(*net.UDPAddr).Port)
		if out, err := exec.Command(ipt, "-w", "-A", "OUTPUT", "-o", "lo", "-p", "udp", "--dport", port,
			"-m", "nfacct", "--nfacct-name", name).CombinedOutput(); err != nil {
			return fmt.Sprintf("iptables cannot add an nfacct rule: %v: %s", err, out)
		}
		conn, err := net.Dial("udp4", sink.LocalAddr().String())
		if err != nil {
			t.Errorf("dial: %v", err)
			return ""
		}
		defer conn.Close()
		payload := make([]byte, 100)
		for range packets {
			if _, err := conn.Write(payload); err != nil {
				t.Errorf("write: %v", err)
				return ""
			}
		}
		got, err := c.Get(name)
		if err != nil {
			t.Errorf("Get: %v", err)
			return ""
		}
		// 20 bytes IPv4 + 8 bytes UDP header per packet.
		want := &Counter{Name: name, Packets: packets, Bytes: packets * (20 + 8 + 100)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("counter (-want +got):\n%s", diff)
		}
		return ""
	})
}
