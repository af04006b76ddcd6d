//go:build unix

package manifests

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
)

func mkfifo(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("cannot create a FIFO here: %v", err)
	}
}

// unblockFIFOs opens every FIFO under dir for writing, so a reader stuck in open
// (the bug under test) returns and the test can fail instead of hanging.
func unblockFIFOs(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type()&os.ModeNamedPipe != 0 {
			if f, err := os.OpenFile(p, os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
				_ = f.Close()
			}
		}
		return nil
	})
}

// syncWithin runs Sync and fails the test if it does not return in time.
func syncWithin(t *testing.T, ctx context.Context, s *Reader, dir string) (Result, error) {
	t.Helper()
	type out struct {
		res Result
		err error
	}
	ch := make(chan out, 1)
	go func() {
		res, err := s.Sync(ctx)
		ch <- out{res, err}
	}()
	select {
	case o := <-ch:
		return o.res, o.err
	case <-time.After(20 * time.Second):
		for range 10 {
			unblockFIFOs(dir)
			select {
			case <-ch:
				t.Fatal("Sync blocked on a special file")
			case <-time.After(100 * time.Millisecond):
			}
		}
		t.Fatal("Sync blocked and could not be released")
	}
	return Result{}, nil
}

// Special files with a manifest name are skipped with a message naming them, never
// opened in a way that blocks; the regular files beside them apply.
func TestSourceSkipsSpecialFiles(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "good.yaml"), svcYAML("good", "10.96.0.1", 80))
	mkfifo(t, filepath.Join(dir, "fifo.yaml"))
	mkfifo(t, filepath.Join(dir, "ignored-fifo"))
	if l, err := (&net.ListenConfig{}).Listen(ctx, "unix", filepath.Join(dir, "sock.yaml")); err == nil {
		t.Cleanup(func() { _ = l.Close() })
	}
	symlinkOrSkip(t, os.DevNull, filepath.Join(dir, "null.yaml"))

	s := NewReader(dir)
	res, err := syncWithin(t, ctx, s, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(serviceNames(t, s), ","); got != "default/good=10.96.0.1" {
		t.Errorf("services = %s", got)
	}
	reasons := map[string]string{}
	for _, p := range res.Problems {
		reasons[filepath.Base(p.File)] = p.Reason
	}
	for name, want := range map[string]string{"fifo.yaml": "named pipe", "null.yaml": "character device"} {
		if !strings.Contains(reasons[name], want) {
			t.Errorf("problem for %s = %q, want one saying %q (all: %v)", name, reasons[name], want, res.Problems)
		}
	}
	if _, ok := reasons["ignored-fifo"]; ok {
		t.Errorf("a special file without a manifest name was reported: %v", res.Problems)
	}
}

// --manifests naming a FIFO fails with a message instead of waiting for a writer.
func TestSourcePathIsFIFO(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "pipe.yaml")
	mkfifo(t, path)
	s := NewReader(path)
	_, err := syncWithin(t, ctx, s, dir)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("Sync error = %v, want one naming %s as a named pipe", err, path)
	}
}

// A file that becomes a FIFO keeps its objects and, under Run, later edits of other
// files still apply (a FIFO created while following used to stop every update).
func TestSourceRunSurvivesFIFOCreatedLater(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeFile(t, a, svcYAML("a", "10.96.0.1", 80))
	writeFile(t, b, svcYAML("b", "10.96.0.2", 80))
	s := NewReader(dir)
	s.Settle = 10 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, 200*time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Run did not stop: blocked on a FIFO")
			for {
				unblockFIFOs(dir)
				select {
				case <-done:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	})
	poll := func(want string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return strings.Join(serviceNames(t, s), ",") == want, nil
		})
		if err != nil {
			t.Fatalf("services = %v, want %s", serviceNames(t, s), want)
		}
	}
	poll("default/a=10.96.0.1,default/b=10.96.0.2")
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	mkfifo(t, b)
	mkfifo(t, filepath.Join(dir, "new.yaml"))
	writeFile(t, a, svcYAML("a", "10.96.0.7", 80))
	poll("default/a=10.96.0.7,default/b=10.96.0.2")
}

// FuzzReadDirectory builds a manifest directory from the input — files, directories,
// FIFOs and symlinks to files, to directories, dangling and in loops — and checks
// that reading it returns, does not panic, and names the path in what it reports.
//
// Each input byte pair is one entry: the first byte picks the kind and the parent
// directory, the second the name; a third byte gives a file's content or a link's
// target.
func FuzzReadDirectory(f *testing.F) {
	f.Add([]byte{0, 1, 0})
	f.Add([]byte{1, 2, 0, 3, 0, 4, 0, 5, 1})
	f.Add([]byte{1, 2, 2, 3, 5, 4, 0, 1, 5, 6, 3})
	f.Add([]byte{4, 7, 0, 6, 1, 2, 7, 2, 1, 0, 3, 1})
	f.Add([]byte{1, 0, 5, 5, 1, 8, 0, 2, 0, 9, 2})
	names := []string{"a.yaml", "b.yml", "c.json", "d", ".hidden.yaml", "e.YAML", "sub", "f~", "g.yaml", "h"}
	contents := []string{
		"",
		svcYAML("s1", "10.96.0.1", 80),
		svcYAML("s2", "10.96.0.2", 80) + "---\n" + svcYAML("s3", "10.96.0.3", 81),
		"kind: [\n",
		`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}`,
		svcYAML("s1", "10.96.0.9", 80),
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 60 {
			data = data[:60]
		}
		root := t.TempDir()
		dirs := []string{root}
		var entries []string
		for i := 0; i+2 < len(data); i += 3 {
			op, name, arg := data[i], names[int(data[i+1])%len(names)], int(data[i+2])
			parent := dirs[int(op>>3)%len(dirs)]
			p := filepath.Join(parent, name)
			if _, err := os.Lstat(p); err == nil {
				continue
			}
			switch op % 8 {
			case 0, 1:
				_ = os.WriteFile(p, []byte(contents[arg%len(contents)]), 0o644)
			case 2:
				if os.Mkdir(p, 0o755) == nil {
					dirs = append(dirs, p)
				}
			case 3:
				_ = syscall.Mkfifo(p, 0o644)
			case 4: // to an entry made so far, maybe a directory above (a loop)
				if len(entries) > 0 {
					_ = os.Symlink(entries[arg%len(entries)], p)
				}
			case 5:
				_ = os.Symlink(dirs[arg%len(dirs)], p)
			case 6:
				_ = os.Symlink(filepath.Join(root, "missing", names[arg%len(names)]), p)
			case 7:
				_ = os.Symlink(p, p) // a link to itself
			}
			entries = append(entries, p)
		}

		s := NewReader(root)
		res, err := syncWithin(t, context.Background(), s, root)
		if err != nil && !strings.Contains(err.Error(), root) {
			t.Errorf("error does not name the path: %v", err)
		}
		for _, p := range res.Problems {
			if !strings.HasPrefix(p.File, root) {
				t.Errorf("problem does not name a path under %s: %+v", root, p)
			}
		}
		// A second read of the same tree changes nothing.
		res2, err2 := syncWithin(t, context.Background(), s, root)
		if (err == nil) != (err2 == nil) || res2.Changed() {
			t.Errorf("second read differs: %+v, %v (first %v)", res2, err2, err)
		}
		// The path is also good as a symlink to it.
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(root, link); err == nil {
			viaLink := NewReader(link)
			r3, err3 := syncWithin(t, context.Background(), viaLink, root)
			if (err == nil) != (err3 == nil) || r3.Created != res.Created {
				t.Errorf("through a symlink: %+v, %v; directly: %+v, %v", r3, err3, res, err)
			}
		}
	})
}
