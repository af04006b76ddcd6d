//go:build unix

package server

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestListenUnixOccupiedPath: Listen replaces nothing but a stale socket. Whatever else
// is at the path (data, a directory, a link, a pipe) is refused with an error naming the
// path and what is there, and is left exactly as it was.
func TestListenUnixOccupiedPath(t *testing.T) {
	tests := []struct {
		name string
		// setup puts something at path and returns a check that it is still there.
		setup   func(t *testing.T, path string) (check func(t *testing.T))
		wantErr string // "" when Listen must succeed
	}{
		{
			name:  "nothing there",
			setup: func(t *testing.T, path string) func(*testing.T) { return func(*testing.T) {} },
		},
		{
			name: "stale socket",
			setup: func(t *testing.T, path string) func(*testing.T) {
				l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
				if err != nil {
					t.Fatal(err)
				}
				l.SetUnlinkOnClose(false)
				l.Close()
				return func(*testing.T) {}
			},
		},
		{
			name: "live socket",
			setup: func(t *testing.T, path string) func(*testing.T) {
				l, err := net.Listen("unix", path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				return func(t *testing.T) {
					c, err := net.Dial("unix", path)
					if err != nil {
						t.Errorf("the live server's socket is gone: %v", err)
						return
					}
					c.Close()
				}
			},
			wantErr: "already listening",
		},
		{
			name: "regular file with data",
			setup: func(t *testing.T, path string) func(*testing.T) {
				if err := os.WriteFile(path, []byte("precious"), 0o644); err != nil {
					t.Fatal(err)
				}
				return func(t *testing.T) {
					if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
						t.Errorf("the file's content is %q, %v", b, err)
					}
				}
			},
			wantErr: "is a regular file",
		},
		{
			name: "empty directory",
			setup: func(t *testing.T, path string) func(*testing.T) {
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
				return func(t *testing.T) {
					if fi, err := os.Lstat(path); err != nil || !fi.IsDir() {
						t.Errorf("the directory is gone: %v", err)
					}
				}
			},
			wantErr: "is a directory",
		},
		{
			name: "symbolic link to a stale socket",
			setup: func(t *testing.T, path string) func(*testing.T) {
				target := path + ".target"
				l, err := net.ListenUnix("unix", &net.UnixAddr{Name: target, Net: "unix"})
				if err != nil {
					t.Fatal(err)
				}
				l.SetUnlinkOnClose(false)
				l.Close()
				if err := os.Symlink(target, path); err != nil {
					t.Fatal(err)
				}
				return func(t *testing.T) {
					if got, err := os.Readlink(path); err != nil || got != target {
						t.Errorf("the link is %q, %v", got, err)
					}
					if fi, err := os.Lstat(target); err != nil || fi.Mode()&os.ModeSocket == 0 {
						t.Errorf("the link's target is gone: %v", err)
					}
				}
			},
			wantErr: "is a symbolic link",
		},
		{
			name: "named pipe",
			setup: func(t *testing.T, path string) func(*testing.T) {
				if err := syscall.Mkfifo(path, 0o600); err != nil {
					t.Fatal(err)
				}
				return func(t *testing.T) {
					if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
						t.Errorf("the pipe is gone: %v", err)
					}
				}
			},
			wantErr: "is a named pipe",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ln.sock")
			check := tc.setup(t, path)
			l, err := Listen("unix://" + path)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Listen: %v", err)
				}
				l.Close()
				if _, err := os.Lstat(path); !os.IsNotExist(err) {
					t.Errorf("the socket is still there after Close: %v", err)
				}
				return
			}
			if err == nil {
				l.Close()
				t.Fatalf("Listen succeeded, want an error containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v, want one naming %s and containing %q", err, path, tc.wantErr)
			}
			check(t)
		})
	}
}

// TestListenUnixRemovesOnlyItsOwnSocket: at exit the socket is removed only if it is
// still the one Listen created; a file or another server's socket put there since
// stays.
func TestListenUnixRemovesOnlyItsOwnSocket(t *testing.T) {
	tests := []struct {
		name    string
		replace func(t *testing.T, path string)
		// kept says what must be at the path after Close: "" for nothing.
		kept string
	}{
		{name: "untouched", replace: func(*testing.T, string) {}},
		{
			name: "replaced by a file",
			replace: func(t *testing.T, path string) {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte("data"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			kept: "regular file",
		},
		{
			name: "replaced by another server's socket",
			replace: func(t *testing.T, path string) {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				l, err := net.Listen("unix", path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
			},
			kept: "socket",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ln.sock")
			l, err := Listen("unix://" + path)
			if err != nil {
				t.Fatal(err)
			}
			tc.replace(t, path)
			l.Close()
			fi, err := os.Lstat(path)
			switch {
			case tc.kept == "" && !os.IsNotExist(err):
				t.Errorf("after Close: %v, want the socket removed", err)
			case tc.kept == "regular file" && (err != nil || !fi.Mode().IsRegular()):
				t.Errorf("after Close: %v, want the file kept", err)
			case tc.kept == "socket" && (err != nil || fi.Mode()&os.ModeSocket == 0):
				t.Errorf("after Close: %v, want the other socket kept", err)
			}
		})
	}
}

// TestListenUnixRelativePath: a relative socket path is refused; it would be served
// relative to the working directory, where no client looks.
func TestListenUnixRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	if l, err := Listen("unix://relative.sock"); err == nil {
		l.Close()
		t.Fatal("Listen(unix://relative.sock) succeeded")
	} else if !strings.Contains(err.Error(), "not absolute") {
		t.Errorf("err = %v", err)
	}
	if _, err := os.Lstat("relative.sock"); !os.IsNotExist(err) {
		t.Errorf("relative.sock was created: %v", err)
	}
}

// TestListenUnixNeverReachableByOthers: the socket is owner-only before it has its name,
// whatever the umask, and a file that appears at the path between the stale-socket check
// and the socket taking its name is neither replaced nor removed.
func TestListenUnixNeverReachableByOthers(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	for _, tc := range []struct {
		name     string
		intruder bool // something is created at the path just before the socket is linked there
	}{
		{name: "private until linked"},
		{name: "a file appears at the path", intruder: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "kp.sock")
			var seen bool
			afterPrivateBind = func(tmp string) {
				seen = true
				fi, err := os.Stat(tmp)
				if err != nil {
					t.Fatal(err)
				}
				if perm := fi.Mode().Perm(); perm != 0o600 {
					t.Errorf("socket mode before it is in place: %o, want 600", perm)
				}
				di, err := os.Stat(filepath.Dir(tmp))
				if err != nil {
					t.Fatal(err)
				}
				if perm := di.Mode().Perm(); perm != 0o700 {
					t.Errorf("private directory mode: %o, want 700", perm)
				}
				if _, err := os.Lstat(path); !os.IsNotExist(err) {
					t.Errorf("the socket is reachable at %s before it is owner-only: %v", path, err)
				}
				if tc.intruder {
					if err := os.WriteFile(path, []byte("operator data"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			defer func() { afterPrivateBind = nil }()

			l, err := Listen("unix://" + path)
			if !seen {
				t.Fatal("the socket was not bound in a private directory first")
			}
			if tc.intruder {
				if err == nil {
					l.Close()
					t.Fatal("Listen replaced a file that appeared at the path")
				}
				if b, rerr := os.ReadFile(path); rerr != nil || string(b) != "operator data" {
					t.Errorf("the file at the path is gone or changed: %q, %v", b, rerr)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if perm := fi.Mode().Perm(); perm != 0o600 {
					t.Errorf("socket mode %o, want 600", perm)
				}
				c, err := net.Dial("unix", path)
				if err != nil {
					t.Fatalf("dialing the linked socket: %v", err)
				}
				c.Close()
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".kp") {
					t.Errorf("private directory %s left behind", e.Name())
				}
			}
		})
	}
}
