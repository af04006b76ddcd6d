package manifests

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// DefaultMaxFileBytes bounds how much of one manifest file is read. It is checked
// against the file's size before reading, so a runaway file (a 100 MB annotation, a
// log redirected into the directory) costs a stat, not memory. A whole cluster's dump
// of ten thousand Services with their EndpointSlices is well below it.
const DefaultMaxFileBytes int64 = 64 << 20

// maxDirDepth bounds how deep the reader descends, symlinked directories included, as
// a backstop to the loop detection.
const maxDirDepth = 64

// listing is what a manifest path stands for at one moment.
type listing struct {
	// files are the regular manifest files, named as reached through the path (a
	// symlink keeps its own name, so messages name what the user wrote).
	files []string
	// problems are manifest-named entries that cannot be read as files: special
	// files, dangling symlinks, symlink loops. They mark their path as having
	// problems, so objects last read from it are kept.
	problems []Problem
	// dirs are the directories walked, for file-system watches.
	dirs []string
	// skipped are directories not walked again (a symlink loop or a second link to
	// a directory already read), for a debug log.
	skipped []string
}

func isManifestName(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// isIgnoredName reports hidden entries (which also covers the "..data" directories
// of Kubernetes ConfigMap volumes, whose files are reached through symlinks beside
// them) and editor scratch files.
func isIgnoredName(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "#") || strings.HasSuffix(name, "~")
}

// listManifests lists the files path stands for: path itself when it is a regular
// file, or every .yaml/.yml/.json file below it when it is a directory. Symlinks are
// followed, the path's own included, and loops are cut. Nothing is opened, so a FIFO
// or a device can never block the reader.
func listManifests(path string) (listing, error) {
	var l listing
	info, err := os.Stat(path)
	if err != nil {
		return l, fmt.Errorf("reading manifests %q: %w", path, err)
	}
	switch {
	case info.Mode().IsRegular():
		l.files = []string{path}
		l.dirs = []string{filepath.Dir(path)}
		// A symlinked file (a ConfigMap subPath, say) changes where it points; watch
		// there as well.
		if real, err := filepath.EvalSymlinks(path); err == nil && filepath.Dir(real) != l.dirs[0] {
			l.dirs = append(l.dirs, filepath.Dir(real))
		}
		return l, nil
	case info.IsDir():
		visited := map[string]bool{}
		if err := l.walk(path, 0, visited); err != nil {
			return l, fmt.Errorf("reading manifests %q: %w", path, err)
		}
		return l, nil
	default:
		return l, fmt.Errorf("reading manifests %q: it is a %s, not a regular file or a directory", path, proxyutil.FileKind(info.Mode()))
	}
}

func (l *listing) walk(dir string, depth int, visited map[string]bool) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = filepath.Clean(dir)
	}
	if depth > maxDirDepth {
		// Not silently: a manifest down there is one the operator wrote
		// and expects applied. Reported as a problem, it is logged at the
		// default verbosity with the other skipped files.
		l.problems = append(l.problems, Problem{File: dir,
			Reason: fmt.Sprintf("directory not read: deeper than %d directories below the manifests path (the limit guards against symlink loops)", maxDirDepth)})
		return nil
	}
	if visited[real] {
		l.skipped = append(l.skipped, dir)
		return nil
	}
	visited[real] = true
	l.dirs = append(l.dirs, dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if isIgnoredName(name) {
			continue
		}
		p := filepath.Join(dir, name)
		mode := e.Type()
		if mode&fs.ModeSymlink != 0 {
			target, err := os.Stat(p)
			if err != nil {
				if isManifestName(name) {
					l.problems = append(l.problems, Problem{File: p, Reason: fmt.Sprintf("cannot follow symlink: %v", unwrapPath(err))})
				}
				continue
			}
			mode = target.Mode().Type()
		}
		switch {
		case mode.IsDir():
			if err := l.walk(p, depth+1, visited); err != nil {
				return err
			}
		case !isManifestName(name):
		case mode.IsRegular():
			l.files = append(l.files, p)
		default:
			l.problems = append(l.problems, Problem{File: p, Reason: fmt.Sprintf("is a %s, not a regular file; skipped", proxyutil.FileKind(mode))})
		}
	}
	return nil
}

// unwrapPath drops the path from a *fs.PathError, for messages that name it already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// errNotRegular is returned by readManifest for a path that turned out not to be a
// regular file when opened (it was replaced after it was listed).
var errNotRegular = errors.New("not a regular file")

// readManifest reads a regular file of at most limit bytes, and returns the opened
// file's information too. It opens without blocking and checks the opened file's
// type, so a file swapped for a FIFO between listing and reading is refused instead
// of waiting for a writer forever.
func readManifest(path string, limit int64) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, unwrapPath(err)
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, unwrapPath(err)
	}
	if !info.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("is a %s: %w; skipped", proxyutil.FileKind(info.Mode()), errNotRegular)
	}
	if info.Size() > limit {
		return nil, nil, fmt.Errorf("file is %d bytes, over the %d-byte limit for one manifest file; split it", info.Size(), limit)
	}
	// The file may grow after the stat; never read more than the limit.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, unwrapPath(err)
	}
	if int64(len(data)) > limit {
		return nil, nil, fmt.Errorf("file grew past the %d-byte limit for one manifest file while being read; split it", limit)
	}
	return data, info, nil
}
