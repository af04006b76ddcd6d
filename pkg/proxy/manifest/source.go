package manifest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// DefaultRescanPeriod is how often Run re-reads every file even without a file-system
// event, which covers network file systems and editors whose writes fsnotify misses.
const DefaultRescanPeriod = 10 * time.Second

// writeBatch bounds how many objects are written before the source waits for watchers
// to drain (see selectingClientset.waitDrained).
const writeBatch = 50

// Source keeps a fake clientset in step with the manifests under one path.
type Source struct {
	path   string
	client *selectingClientset

	// syncMu serialises Sync; cache is only touched under it.
	syncMu sync.Mutex
	// cache keeps each file's last decode, so a rescan of unchanged files costs a
	// read and a compare.
	cache map[string]decoded

	mu      sync.Mutex
	applied map[Key]applied
	// reported holds the problems last logged, so a periodic rescan of unchanged
	// broken files does not repeat them.
	reported string
}

type decoded struct {
	data     []byte
	objs     []Object
	problems []Problem
}

type applied struct {
	obj  runtime.Object
	file string
	line int
}

// Result summarises one Sync.
type Result struct {
	Created, Updated, Deleted, Unchanged int
	// Kept counts objects whose document disappeared from a file that currently has
	// problems; they stay as last applied until the file reads cleanly.
	Kept     int
	Problems []Problem
}

// Changed reports whether the sync wrote anything.
func (r Result) Changed() bool { return r.Created+r.Updated+r.Deleted > 0 }

// NewSource returns a source for path, a file or a directory. Nothing is read until
// Sync or Run.
func NewSource(path string) *Source {
	return &Source{path: path, client: newSelectingClientset(), applied: map[Key]applied{}, cache: map[string]decoded{}}
}

// Client returns the clientset the source writes to. Informers built on it see the
// manifests' objects as if they came from an API server.
func (s *Source) Client() kubernetes.Interface { return s.client }

// Path returns the file or directory the source reads.
func (s *Source) Path() string { return s.path }

// Objects returns a copy of every object currently applied, sorted by key.
func (s *Source) Objects() []runtime.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]Key, 0, len(s.applied))
	for k := range s.applied {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	out := make([]runtime.Object, 0, len(keys))
	for _, k := range keys {
		out = append(out, s.applied[k].obj.DeepCopyObject())
	}
	return out
}

// manifestFiles lists the files a path stands for: the path itself, or every
// .yaml/.yml/.json file below a directory, skipping hidden and editor backup files.
func manifestFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifests %q: %w", path, err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != path && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "#") || strings.HasSuffix(name, "~")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		switch strings.ToLower(filepath.Ext(name)) {
		case ".yaml", ".yml", ".json":
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading manifests %q: %w", path, err)
	}
	sort.Strings(files)
	return files, nil
}

// Sync reads every file once and makes the clientset match: new objects are created,
// changed ones updated, and ones no longer in any file deleted. A rejected document
// does not stop the others; objects from a file that currently has problems are kept
// rather than deleted, so a half-saved edit never tears down what is programmed.
func (s *Source) Sync(ctx context.Context) (Result, error) {
	logger := klog.FromContext(ctx)
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	files, err := manifestFiles(s.path)
	if err != nil {
		return Result{}, err
	}

	var res Result
	desired := map[Key]applied{}
	dirty := map[string]bool{}
	present := map[string]bool{}
	for _, f := range files {
		present[f] = true
		data, err := os.ReadFile(f)
		if err != nil {
			res.Problems = append(res.Problems, Problem{File: f, Reason: err.Error()})
			dirty[f] = true
			continue
		}
		c, ok := s.cache[f]
		if !ok || !bytes.Equal(c.data, data) {
			c.objs, c.problems = Decode(f, data)
			c.data = data
			s.cache[f] = c
		}
		objs, problems := c.objs, c.problems
		if len(problems) > 0 {
			dirty[f] = true
			res.Problems = append(res.Problems, problems...)
		}
		for _, o := range objs {
			key, _ := KeyOf(o.Object)
			if prev, dup := desired[key]; dup {
				res.Problems = append(res.Problems, Problem{File: o.File, Line: o.Line, Object: key.String(),
					Reason: fmt.Sprintf("duplicate of the object at %s:%d; ignored", prev.file, prev.line)})
				continue
			}
			desired[key] = applied{obj: o.Object, file: o.File, line: o.Line}
		}
	}

	for f := range s.cache {
		if !present[f] {
			delete(s.cache, f)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	type op struct {
		key    Key
		obj    runtime.Object
		action string
	}
	var ops []op
	for key, d := range desired {
		prev, ok := s.applied[key]
		switch {
		case !ok:
			ops = append(ops, op{key, d.obj, "create"})
		case !equality.Semantic.DeepEqual(prev.obj, d.obj):
			ops = append(ops, op{key, d.obj, "update"})
		default:
			res.Unchanged++
			s.applied[key] = d // the location may have moved
		}
	}
	for key, prev := range s.applied {
		if _, ok := desired[key]; ok {
			continue
		}
		if present[prev.file] && dirty[prev.file] {
			res.Kept++
			continue
		}
		ops = append(ops, op{key, prev.obj, "delete"})
	}
	// Write Nodes and ServiceCIDRs before Services and Services before their
	// EndpointSlices, and delete in the reverse order, as a controller would.
	rank := map[string]int{"nodes": 0, "servicecidrs": 1, "services": 2, "endpointslices": 3}
	sort.SliceStable(ops, func(i, j int) bool {
		di, dj := ops[i].action == "delete", ops[j].action == "delete"
		if di != dj {
			return !di
		}
		ri, rj := rank[ops[i].key.Resource], rank[ops[j].key.Resource]
		if ri != rj {
			if di {
				return ri > rj
			}
			return ri < rj
		}
		return ops[i].key.String() < ops[j].key.String()
	})

	var errs []error
	for i, o := range ops {
		if i > 0 && i%writeBatch == 0 {
			if !s.client.waitDrained(30 * time.Second) {
				errs = append(errs, errors.New("watchers did not drain within 30s; will retry on the next sync"))
				break
			}
		}
		if err := s.write(o.action, o.key, o.obj); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", o.action, o.key, err))
			continue
		}
		switch o.action {
		case "create":
			res.Created++
			s.applied[o.key] = desired[o.key]
		case "update":
			res.Updated++
			s.applied[o.key] = desired[o.key]
		case "delete":
			res.Deleted++
			delete(s.applied, o.key)
		}
	}

	s.report(logger, res)
	return res, errors.Join(errs...)
}

func (s *Source) report(logger klog.Logger, res Result) {
	if res.Changed() {
		logger.Info("Applied manifests", "path", s.path, "created", res.Created, "updated", res.Updated,
			"deleted", res.Deleted, "unchanged", res.Unchanged, "kept", res.Kept, "rejected", len(res.Problems))
	}
	var b strings.Builder
	for _, p := range res.Problems {
		b.WriteString(p.Error())
		b.WriteByte('\n')
	}
	if b.String() == s.reported {
		return
	}
	s.reported = b.String()
	for _, p := range res.Problems {
		logger.Error(nil, "Rejected manifest document", "file", p.File, "line", p.Line, "object", p.Object, "reason", p.Reason)
	}
	if res.Kept > 0 {
		logger.Info("Keeping objects from manifest files that have problems until they read cleanly", "count", res.Kept)
	}
}

// stableUID derives a UID from the object's identity, so restarts and updates keep it.
func stableUID(key Key) types.UID {
	sum := sha256.Sum256([]byte(key.String()))
	h := hex.EncodeToString(sum[:16])
	return types.UID(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32])
}

func (s *Source) write(action string, key Key, obj runtime.Object) error {
	_, info, ok := kindFor(obj)
	if !ok {
		return fmt.Errorf("unsupported object %T", obj)
	}
	tracker := s.client.Tracker()
	switch action {
	case "delete":
		return tracker.Delete(info.gvr, key.Namespace, key.Name)
	}
	obj = obj.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	m.SetUID(stableUID(key))
	m.SetResourceVersion("")
	if action == "create" {
		m.SetCreationTimestamp(metav1.Now())
		return tracker.Create(info.gvr, obj, key.Namespace)
	}
	current, err := tracker.Get(info.gvr, key.Namespace, key.Name)
	if err != nil {
		return err
	}
	if cm, err := meta.Accessor(current); err == nil {
		m.SetCreationTimestamp(cm.GetCreationTimestamp())
		m.SetResourceVersion(cm.GetResourceVersion())
	}
	return tracker.Update(info.gvr, obj, key.Namespace)
}

// Run syncs once, then again whenever a file under the path changes and at least every
// rescan period (DefaultRescanPeriod when zero), until ctx is done. The first sync's
// error is returned, so a missing path fails fast; later errors are logged.
func (s *Source) Run(ctx context.Context, rescan time.Duration) error {
	logger := klog.FromContext(ctx)
	if rescan <= 0 {
		rescan = DefaultRescanPeriod
	}
	if _, err := os.Stat(s.path); err != nil {
		return fmt.Errorf("reading manifests %q: %w", s.path, err)
	}

	// Watch before the first read, so a change made right after it is not missed.
	trigger := make(chan struct{}, 1)
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		logger.Error(err, "Cannot watch manifest files; relying on the periodic rescan", "period", rescan)
	} else {
		defer func() { _ = watcher.Close() }()
		s.addWatches(logger, watcher)
		go func() {
			for {
				select {
				case _, ok := <-watcher.Events:
					if !ok {
						return
					}
					select {
					case trigger <- struct{}{}:
					default:
					}
				case werr, ok := <-watcher.Errors:
					if !ok {
						return
					}
					logger.Error(werr, "Manifest watch error; the periodic rescan continues")
				}
			}
		}()
	}

	if _, err := s.Sync(ctx); err != nil {
		return err
	}

	ticker := time.NewTicker(rescan)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-trigger:
			// Editors write in several steps; let them finish before reading.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
			select {
			case <-trigger:
			default:
			}
		case <-ticker.C:
		}
		if _, err := s.Sync(ctx); err != nil {
			logger.Error(err, "Manifest sync failed; keeping the objects last applied", "path", s.path)
		}
		if watcher != nil {
			s.addWatches(logger, watcher)
		}
	}
}

// addWatches watches the directory of a file path (editors replace files by renaming,
// which a watch on the file itself would lose) or every directory below a directory path.
func (s *Source) addWatches(logger klog.Logger, w *fsnotify.Watcher) {
	info, err := os.Stat(s.path)
	if err != nil {
		return
	}
	dirs := []string{filepath.Dir(s.path)}
	if info.IsDir() {
		dirs = nil
		_ = filepath.WalkDir(s.path, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				if p != s.path && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	watched := w.WatchList()
	for _, d := range dirs {
		if slices.Contains(watched, d) {
			continue
		}
		if err := w.Add(d); err != nil {
			logger.V(2).Info("Cannot watch manifest directory", "dir", d, "err", err)
		}
	}
}
