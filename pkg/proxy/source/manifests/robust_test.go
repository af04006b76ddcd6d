package manifests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// bufferedContext returns a context whose logger keeps what is logged, for tests
// that check a message is given.
func bufferedContext(t *testing.T) (context.Context, func() string) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	return ctx, func() string {
		return logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	}
}

func symlinkOrSkip(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks unavailable here: %v", err)
	}
}

// A symlink to a directory, given without a trailing slash, is the directory: it
// used to read as a lone non-manifest file, load nothing and so delete everything.
func TestSourceFollowsSymlinks(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	base := t.TempDir()
	real := filepath.Join(base, "real")
	writeFile(t, filepath.Join(real, "a.yaml"), svcYAML("a", "10.96.0.1", 80))
	other := filepath.Join(base, "other")
	writeFile(t, filepath.Join(other, "b.yaml"), svcYAML("b", "10.96.0.2", 80))
	// A symlinked subdirectory is followed; one pointing back up is a loop and cut.
	symlinkOrSkip(t, other, filepath.Join(real, "linked"))
	symlinkOrSkip(t, real, filepath.Join(real, "loop"))
	symlinkOrSkip(t, filepath.Join(other, "b.yaml"), filepath.Join(real, "c.yaml"))
	link := filepath.Join(base, "link")
	symlinkOrSkip(t, real, link)

	for _, path := range []string{link, link + string(filepath.Separator), real} {
		s := NewReader(path)
		res, err := s.Sync(ctx)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got := strings.Join(serviceNames(t, s), ",")
		// b is reached twice (linked/b.yaml and c.yaml): one copy is a duplicate.
		if want := "default/a=10.96.0.1,default/b=10.96.0.2"; got != want {
			t.Errorf("%s: services = %s, want %s (result %+v)", path, got, want, res)
		}
	}
}

// Objects must not all vanish because of how the path was read: only files that read
// cleanly and hold no objects any more remove them.
func TestSourceKeepsObjectsWhenReadComesBackEmpty(t *testing.T) {
	tests := []struct {
		name    string
		change  func(t *testing.T, dir, link string)
		viaLink bool // read the directory through a symlink to it
		wantErr string
		want    string
	}{
		{
			name:    "the path vanished",
			change:  func(t *testing.T, dir, link string) { _ = os.Remove(link) },
			viaLink: true,
			wantErr: "link",
			want:    "default/a=10.96.0.1,default/b=10.96.0.2",
		},
		{
			name: "the symlink now points at an empty directory",
			change: func(t *testing.T, dir, link string) {
				empty := filepath.Join(filepath.Dir(dir), "empty")
				if err := os.Mkdir(empty, 0o755); err != nil {
					t.Fatal(err)
				}
				_ = os.Remove(link)
				symlinkOrSkip(t, empty, link)
			},
			viaLink: true,
			wantErr: "no manifest files",
			want:    "default/a=10.96.0.1,default/b=10.96.0.2",
		},
		{
			name: "every file was removed",
			change: func(t *testing.T, dir, link string) {
				_ = os.Remove(filepath.Join(dir, "a.yaml"))
				_ = os.Remove(filepath.Join(dir, "b.yaml"))
			},
			wantErr: "no manifest files",
			want:    "default/a=10.96.0.1,default/b=10.96.0.2",
		},
		{
			name: "a file became a directory",
			change: func(t *testing.T, dir, link string) {
				_ = os.Remove(filepath.Join(dir, "a.yaml"))
				if err := os.Mkdir(filepath.Join(dir, "a.yaml"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			want: "default/a=10.96.0.1,default/b=10.96.0.2",
		},
		{
			name: "a file became a dangling symlink",
			change: func(t *testing.T, dir, link string) {
				_ = os.Remove(filepath.Join(dir, "a.yaml"))
				symlinkOrSkip(t, filepath.Join(dir, "gone"), filepath.Join(dir, "a.yaml"))
			},
			want: "default/a=10.96.0.1,default/b=10.96.0.2",
		},
		{
			name: "files emptied on purpose remove their objects",
			change: func(t *testing.T, dir, link string) {
				writeFile(t, filepath.Join(dir, "a.yaml"), "")
				writeFile(t, filepath.Join(dir, "b.yaml"), "# nothing here any more\n")
			},
			want: "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			base := t.TempDir()
			dir := filepath.Join(base, "m")
			writeFile(t, filepath.Join(dir, "a.yaml"), svcYAML("a", "10.96.0.1", 80))
			writeFile(t, filepath.Join(dir, "b.yaml"), svcYAML("b", "10.96.0.2", 80))
			link := filepath.Join(base, "link")
			symlinkOrSkip(t, dir, link)
			path := dir
			if tc.viaLink {
				path = link
			}
			s := NewReader(path)
			if _, err := s.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(serviceNames(t, s), ","); got != "default/a=10.96.0.1,default/b=10.96.0.2" {
				t.Fatalf("initial services = %s", got)
			}
			tc.change(t, dir, link)
			_, err := s.Sync(ctx)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Sync: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Sync error = %v, want one containing %q", err, tc.wantErr)
			}
			if got := strings.Join(serviceNames(t, s), ","); got != tc.want {
				t.Errorf("services = %s, want %s", got, tc.want)
			}
		})
	}
}

// A start that finds nothing to apply says so, naming the path, since it will remove
// every Service rule the node has.
func TestSourceWarnsOnEmptyStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		warn  bool
	}{
		{name: "empty directory", warn: true},
		{name: "only an empty file", files: map[string]string{"a.yaml": ""}, warn: true},
		{name: "only rejected documents", files: map[string]string{"a.yaml": "kind: Pod\napiVersion: v1\n"}, warn: true},
		{name: "objects", files: map[string]string{"a.yaml": svcYAML("a", "10.96.0.1", 80)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, logs := bufferedContext(t)
			dir := t.TempDir()
			for name, data := range tc.files {
				writeFile(t, filepath.Join(dir, name), data)
			}
			s := NewReader(dir)
			if _, err := s.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			got := logs()
			warned := strings.Contains(got, "Warning: the manifests hold no objects") && strings.Contains(got, dir)
			if warned != tc.warn {
				t.Errorf("warned = %v, want %v; log:\n%s", warned, tc.warn, got)
			}
		})
	}
}

// A file written in two parts must be applied once, whole, not part by part.
func TestSourceRunWaitsForWritesToSettle(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	dir := t.TempDir()
	s := NewReader(dir)
	// Far longer than the pause between the two writes below, so a slow machine
	// cannot make the test see the half-written file.
	s.Settle = 1500 * time.Millisecond
	w, err := s.Client().CoreV1().Services("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, time.Hour) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	// Run has read the empty directory once it watches; give it a moment to get there.
	time.Sleep(200 * time.Millisecond)

	path := filepath.Join(dir, "web.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(svcYAML("web", "10.96.0.1", 80)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := f.WriteString("    targetPort: 8080\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	select {
	case ev := <-w.ResultChan():
		svc, ok := ev.Object.(*v1.Service)
		if !ok || ev.Type != watch.Added {
			t.Fatalf("first event = %s %T", ev.Type, ev.Object)
		}
		if got := svc.Spec.Ports[0].TargetPort.IntValue(); got != 8080 {
			t.Errorf("the half-written file was applied: first version has targetPort %d, want 8080", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the file was never applied")
	}
}
