package server

import (
	"slices"
	"sort"
	"sync"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
)

// kind is the kind of a stored object.
type kind uint8

const (
	kindService kind = iota
	kindGlobalService
	kindEndpointSlice
	kindNode
	kindServiceCIDR
)

// key names one stored object: the family only for node-local services.
type key struct {
	kind   kind
	family localnode.Family
	name   string
}

// entry is a key's latest op (a set, or a delete for a tombstone) and the revision that
// wrote it. Ops are never modified once stored, so watchers share them without copying.
type entry struct {
	rev  uint64
	op   *localnodev1.Op
	dead bool
}

type change struct {
	key key
	op  *localnodev1.Op
	del bool
}

type logEntry struct {
	rev uint64
	key key
}

// store is the served state. Every commit is one revision.
type store struct {
	maxTombstones int
	maxLog        int

	mu      sync.RWMutex
	rev     uint64
	entries map[key]*entry
	dead    int
	// compacted: tombstones of revisions up to it were dropped, so a watcher at an older
	// revision cannot be told of those deletions and must start over.
	compacted uint64
	// log lists the keys of the latest revisions, so a watcher a few revisions behind
	// finds what changed without a pass over every key. It covers every change after
	// logFrom-1.
	log     []logEntry
	logFrom uint64
	// notify is closed, and replaced, at every commit.
	notify chan struct{}
}

func newStore(maxTombstones, maxLog int) *store {
	return &store{
		maxTombstones: maxTombstones, maxLog: maxLog,
		entries: map[key]*entry{}, notify: make(chan struct{}), logFrom: 1,
	}
}

// commit applies changes as one revision; nothing is committed for no change.
func (s *store) commit(changes []change) {
	if len(changes) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	for _, c := range changes {
		old := s.entries[c.key]
		if c.del {
			if old == nil || old.dead {
				continue
			}
			s.dead++
		} else if old != nil && old.dead {
			s.dead--
		}
		s.entries[c.key] = &entry{rev: s.rev, op: c.op, dead: c.del}
		s.log = append(s.log, logEntry{rev: s.rev, key: c.key})
	}
	s.trimLog()
	if s.dead > s.maxTombstones {
		s.compact()
	}
	close(s.notify)
	s.notify = make(chan struct{})
}

// trimLog keeps the log within maxLog entries, dropping whole revisions only.
func (s *store) trimLog() {
	if len(s.log) <= s.maxLog {
		return
	}
	cut := len(s.log) - s.maxLog
	// Never keep part of a revision: drop the rest of the one cut into.
	for cut < len(s.log) && s.log[cut].rev == s.log[cut-1].rev {
		cut++
	}
	if cut == len(s.log) {
		s.logFrom = s.rev + 1
	} else {
		s.logFrom = s.log[cut].rev
	}
	s.log = slices.Clone(s.log[cut:])
}

// compact drops the older half of the tombstones.
func (s *store) compact() {
	revs := make([]uint64, 0, s.dead)
	for _, e := range s.entries {
		if e.dead {
			revs = append(revs, e.rev)
		}
	}
	slices.Sort(revs)
	upTo := revs[len(revs)/2]
	for k, e := range s.entries {
		if e.dead && e.rev <= upTo {
			delete(s.entries, k)
			s.dead--
		}
	}
	s.compacted = max(s.compacted, upTo)
}

// filter selects what one watcher asked for.
type filter struct {
	families []localnode.Family // nil: all
	local    bool
	global   bool
}

func (f *filter) wants(k key) bool {
	if k.kind == kindService {
		return f.local && (f.families == nil || slices.Contains(f.families, k.family))
	}
	return f.global
}

// keysSince returns the keys a watcher at revision from must be sent to reach the
// current revision, which it also returns. reset is true (and the keys those of the whole
// state) when from is 0, full is set, or from is older than what the store can describe
// as changes. Keys, not values: a slow watcher then pins no old values, only names.
func (s *store) keysSince(from uint64, full bool, f *filter) (keys []key, rev uint64, reset bool, notify <-chan struct{}) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	rev, notify = s.rev, s.notify
	if from == 0 || full || from < s.compacted || from > s.rev {
		keys = make([]key, 0, len(s.entries)-s.dead)
		for k, e := range s.entries {
			if !e.dead && f.wants(k) {
				keys = append(keys, k)
			}
		}
		return keys, rev, true, notify
	}
	if from == s.rev {
		return nil, rev, false, notify
	}
	if from+1 >= s.logFrom {
		i := sort.Search(len(s.log), func(i int) bool { return s.log[i].rev > from })
		seen := make(map[key]struct{}, len(s.log)-i)
		for _, le := range s.log[i:] {
			if _, dup := seen[le.key]; dup || !f.wants(le.key) {
				continue
			}
			seen[le.key] = struct{}{}
			keys = append(keys, le.key)
		}
		return keys, rev, false, notify
	}
	for k, e := range s.entries {
		if e.rev > from && f.wants(k) {
			keys = append(keys, k)
		}
	}
	return keys, rev, false, notify
}

// lookup returns the current op of each key (nil for a key the store no longer holds:
// a tombstone compacted away).
func (s *store) lookup(keys []key, out []*localnodev1.Op) []*localnodev1.Op {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, k := range keys {
		var op *localnodev1.Op
		if e := s.entries[k]; e != nil {
			op = e.op
		}
		out = append(out, op)
	}
	return out
}

// since is keysSince with the current values, for one-shot readers (Snapshot).
func (s *store) since(from uint64, full bool, f *filter) (ops []*localnodev1.Op, rev uint64, reset bool) {
	keys, rev, reset, _ := s.keysSince(from, full, f)
	for _, op := range s.lookup(keys, nil) {
		if op != nil {
			ops = append(ops, op)
		}
	}
	return ops, rev, reset
}

// revision returns the current revision.
func (s *store) revision() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rev
}

// size returns the number of live objects and of tombstones.
func (s *store) size() (live, dead int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.entries) - s.dead, s.dead
}
