package manifests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// DefaultSettle is how long Run waits for a file changed in place to stay unchanged
// before applying it, so a file written in several steps (a copy, a slow editor, a
// script appending documents) is applied once, whole. A file replaced by another one
// renamed into place is complete by construction and applies at once.
const DefaultSettle = 500 * time.Millisecond

// maxHoldFactor bounds, in settle periods, how long a file that never stops changing
// is held back: a writer rewriting it in place more often than the settle time must
// not stop every update.
const maxHoldFactor = 10

// Reader keeps a fake clientset in step with the manifests under one path.
type Reader struct {
	// Settle is how long a file changed in place must stay unchanged before Run
	// applies it (DefaultSettle when 0; negative applies every change at once); a
	// file that keeps changing is applied after ten times as long regardless. Sync,
	// an explicit read, applies at once. Set it before Run.
	Settle time.Duration
	// MaxFileBytes bounds the size of one manifest file (DefaultMaxFileBytes when
	// 0); a larger file is rejected without being read. Set it before Sync or Run.
	MaxFileBytes int64

	path   string
	client *selectingClientset
	// now is the clock debouncing reads; tests replace it.
	now func() time.Time

	// syncMu serialises Sync; cache, dirs and started are only touched under it.
	syncMu sync.Mutex
	// cache keeps each file's last decode, so a rescan of unchanged files costs a
	// read and a hash, and the content of a file still being written.
	cache map[string]fileState
	// dirs are the directories the last read walked, for watches.
	dirs []string
	// started is set after the first successful read.
	started bool

	mu      sync.Mutex
	applied map[Key]applied
	// reported holds the problems last logged, so a periodic rescan of unchanged
	// broken files does not repeat them.
	reported string
}

// fileState is what the source knows of one file.
type fileState struct {
	// decoded says sum, objs and problems hold the version in use.
	decoded  bool
	sum      [sha256.Size]byte
	objs     []Object
	problems []Problem

	// info is the file as last read, to tell a file replaced by a rename (a new
	// file, complete) from one written in place (maybe half written).
	info fs.FileInfo

	// pending is a newer content not yet quiet for the settle time: since when
	// it has had this content, and since when the file has been changing.
	pending      bool
	pendingSum   [sha256.Size]byte
	pendingSince time.Time
	pendingFirst time.Time
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
	Kept int
	// Pending counts changed files not applied yet because they changed too
	// recently (see Reader.Settle); a later pass applies them.
	Pending  int
	Problems []Problem
}

// Changed reports whether the sync wrote anything.
func (r Result) Changed() bool { return r.Created+r.Updated+r.Deleted > 0 }

// NewReader returns a source for path, a file or a directory (a symlink to either is
// followed). Nothing is read until Sync or Run.
func NewReader(path string) *Reader {
	return &Reader{path: path, client: newSelectingClientset(), now: time.Now,
		applied: map[Key]applied{}, cache: map[string]fileState{}}
}

// Client returns the clientset the source writes to. Informers built on it see the
// manifests' objects as if they came from an API server.
func (s *Reader) Client() kubernetes.Interface { return s.client }

// Path returns the file or directory the source reads.
func (s *Reader) Path() string { return s.path }

// Objects returns a copy of every object currently applied, sorted by key.
func (s *Reader) Objects() []runtime.Object {
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

func (s *Reader) maxFileBytes() int64 {
	if s.MaxFileBytes > 0 {
		return s.MaxFileBytes
	}
	return DefaultMaxFileBytes
}

func (s *Reader) settle() time.Duration {
	switch {
	case s.Settle < 0:
		return 0
	case s.Settle == 0:
		return DefaultSettle
	}
	return s.Settle
}

// Sync reads every file once and makes the clientset match: new objects are created,
// changed ones updated, and ones no longer in any file deleted. A rejected document
// does not stop the others; objects from a file that currently has problems are kept
// rather than deleted, so a half-saved edit never tears down what is programmed.
//
// A read that finds no manifest file at all while objects are applied (the path now
// leads to an empty directory, every file was removed) is an error and changes
// nothing: that is how a wrong or broken path looks, and applying it would remove
// every Service. Files that remain but hold no objects do remove them.
func (s *Reader) Sync(ctx context.Context) (Result, error) {
	res, _, err := s.sync(ctx, 0)
	return res, err
}

// sync is Sync with changed files held back until they have been unchanged for
// settle; it also returns when the earliest held file will be due (zero if none).
func (s *Reader) sync(ctx context.Context, settle time.Duration) (Result, time.Time, error) {
	logger := klog.FromContext(ctx)
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	l, err := listManifests(s.path)
	if err != nil {
		return Result{}, time.Time{}, err
	}
	s.dirs = l.dirs
	for _, d := range l.skipped {
		logger.V(4).Info("Not reading a manifest directory twice (a symlink loop or a second link to it)", "dir", d)
	}

	var res Result
	var due time.Time
	now := s.now()
	desired := map[Key]applied{}
	var order []Key
	dirty := map[string]bool{}
	present := map[string]bool{}
	for _, p := range l.problems {
		present[p.File] = true
		dirty[p.File] = true
		res.Problems = append(res.Problems, p)
	}
	// A file whose path is now a directory is a read gone wrong, not an empty file.
	for _, d := range l.dirs {
		if c, ok := s.cache[d]; ok && c.decoded {
			present[d] = true
			dirty[d] = true
			res.Problems = append(res.Problems, Problem{File: d, Reason: "was a manifest file and is now a directory; keeping what it held"})
		}
	}
	for _, f := range l.files {
		present[f] = true
		data, info, err := readManifest(f, s.maxFileBytes())
		if err != nil {
			res.Problems = append(res.Problems, Problem{File: f, Reason: err.Error()})
			dirty[f] = true
			continue
		}
		sum := sha256.Sum256(data)
		c := s.cache[f]
		replaced := c.info != nil && !os.SameFile(c.info, info)
		c.info = info
		switch {
		case c.decoded && c.sum == sum:
			c.pending = false
		case settle > 0 && !replaced:
			if !c.pending {
				c.pendingFirst = now
			}
			if !c.pending || c.pendingSum != sum {
				c.pending, c.pendingSum, c.pendingSince = true, sum, now
			}
			wait := c.pendingSince.Add(settle)
			if limit := c.pendingFirst.Add(maxHoldFactor * settle); limit.Before(wait) {
				wait = limit
			}
			if now.Before(wait) {
				res.Pending++
				if due.IsZero() || wait.Before(due) {
					due = wait
				}
				s.cache[f] = c
				if !c.decoded {
					// A new file: as if it were not there yet.
					present[f] = false
					continue
				}
				break
			}
			fallthrough
		default:
			c = fileState{decoded: true, sum: sum, info: info}
			c.objs, c.problems = Decode(f, data)
		}
		s.cache[f] = c
		objs, problems := c.objs, c.problems
		if len(problems) > 0 {
			dirty[f] = true
			res.Problems = append(res.Problems, problems...)
		}
		for _, o := range objs {
			key, _ := KeyOf(o.Object)
			if prev, dup := desired[key]; dup {
				res.Problems = append(res.Problems, Problem{File: o.File, Line: o.Line, Object: describeKey(key),
					Reason: fmt.Sprintf("duplicate of the object at %s:%d; ignored", prev.file, prev.line)})
				dirty[o.File] = true
				continue
			}
			desired[key] = applied{obj: o.Object, file: o.File, line: o.Line}
			order = append(order, key)
		}
	}

	for f := range s.cache {
		if _, ok := present[f]; !ok {
			delete(s.cache, f)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	if len(l.files)+len(l.problems) == 0 && len(s.applied) > 0 {
		return Result{Kept: len(s.applied)}, due, fmt.Errorf("no manifest files (*.yaml, *.yml, *.json) under %q, which held %d objects: keeping them, since "+
			"this is how a wrong or unreadable path looks (to remove every object on purpose, leave an empty manifest file)", s.path, len(s.applied))
	}

	for _, p := range rejectOutOfRange(desired, order) {
		dirty[p.File] = true
		res.Problems = append(res.Problems, p)
	}
	for _, p := range s.rejectConflicts(desired, order) {
		dirty[p.File] = true
		res.Problems = append(res.Problems, p)
	}

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
	if !s.started && len(errs) == 0 {
		s.started = true
		if len(s.applied) == 0 {
			logger.Info("Warning: the manifests hold no objects; every Service rule this proxy programmed before will be removed. Check the path",
				"path", s.path, "files", len(l.files), "rejected", len(res.Problems))
		}
	}
	return res, due, errors.Join(errs...)
}

func (s *Reader) report(logger klog.Logger, res Result) {
	if res.Changed() {
		logger.Info("Applied manifests", "path", s.path, "created", res.Created, "updated", res.Updated,
			"deleted", res.Deleted, "unchanged", res.Unchanged, "kept", res.Kept, "rejected", len(res.Problems))
	}
	if res.Pending > 0 {
		logger.V(2).Info("Waiting for changed manifest files to settle", "files", res.Pending)
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
		if p.Line == 0 && p.Object == "" {
			logger.Error(nil, "Skipped manifest file", "file", p.File, "reason", p.Reason)
			continue
		}
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

func (s *Reader) write(action string, key Key, obj runtime.Object) error {
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
// rescan period (DefaultRescanPeriod when zero), until ctx is done. A changed file is
// applied once it has stayed unchanged for the settle time (see Reader.Settle). The
// first sync's error is returned, so a missing path fails fast; later errors are
// logged, and the objects last applied stay.
func (s *Reader) Run(ctx context.Context, rescan time.Duration) error {
	logger := klog.FromContext(ctx)
	if rescan <= 0 {
		rescan = DefaultRescanPeriod
	}
	l, err := listManifests(s.path)
	if err != nil {
		return err
	}

	// Watch before the first read, so a change made right after it is not missed.
	trigger := make(chan struct{}, 1)
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		logger.Error(err, "Cannot watch manifest files; relying on the periodic rescan", "period", rescan)
	} else {
		defer func() { _ = watcher.Close() }()
		addWatches(logger, watcher, l.dirs)
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
	// settled fires when a file held back for changing too recently is due.
	settled := time.NewTimer(time.Hour)
	settled.Stop()
	defer settled.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-trigger:
			// One write is often several events; read once they have arrived.
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
		case <-settled.C:
		}
		_, due, err := s.sync(ctx, s.settle())
		if err != nil {
			logger.Error(err, "Manifest sync failed; keeping the objects last applied", "path", s.path)
		}
		settled.Stop()
		if !due.IsZero() {
			settled.Reset(max(time.Until(due), 10*time.Millisecond))
		}
		if watcher != nil {
			s.syncMu.Lock()
			dirs := s.dirs
			s.syncMu.Unlock()
			addWatches(logger, watcher, dirs)
		}
	}
}

// addWatches watches dirs: the directory of a file path (editors replace files by
// renaming, which a watch on the file itself would lose) or every directory a
// directory path reaches.
func addWatches(logger klog.Logger, w *fsnotify.Watcher, dirs []string) {
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
