package diffstore

// Change is one key's difference between two waves. For an added key Old is the zero value;
// for a deleted key New is the zero value.
type Change[K comparable, V any] struct {
	Key K
	Old V
	New V
}

// Store holds the values of the last finished wave and computes the difference that the
// current wave makes to them.
type Store[K comparable, V any] struct {
	equal func(a, b V) bool

	entries map[K]*entry[V]
	// previous holds the keys of the last finished wave in the order they were set, so that
	// deletions are reported deterministically; current collects this wave's keys.
	previous []K
	current  []K
	wave     uint64
	finished bool

	added     []Change[K, V]
	updated   []Change[K, V]
	deleted   []Change[K, V]
	unchanged []K
}

type entry[V any] struct {
	value V
	// old is the value the key had in the previous wave; valid when existed is true.
	old     V
	existed bool
	setIn   uint64
}

// New returns an empty Store that compares values with equal. The first wave is open.
func New[K comparable, V any](equal func(a, b V) bool) *Store[K, V] {
	return &Store[K, V]{equal: equal, entries: map[K]*entry[V]{}, wave: 1}
}

// NewComparable returns an empty Store for values that can be compared with ==.
func NewComparable[K comparable, V comparable]() *Store[K, V] {
	return New[K, V](func(a, b V) bool { return a == b })
}

// Set records key's value in the current wave. Setting a key twice in one wave keeps the
// last value. Calling Set after Finish begins the next wave first, as Next would.
func (s *Store[K, V]) Set(key K, value V) {
	if s.finished {
		s.Next()
	}
	e, ok := s.entries[key]
	if !ok {
		e = &entry[V]{}
		s.entries[key] = e
	}
	if e.setIn != s.wave {
		e.setIn = s.wave
		if e.existed {
			e.old = e.value
		}
		s.current = append(s.current, key)
	}
	e.value = value
}

// Finish closes the current wave: every key of the previous wave that was not Set is deleted,
// and Added, Updated, Deleted and Unchanged describe the wave until the next one begins.
// Finishing an already finished wave does nothing.
func (s *Store[K, V]) Finish() {
	if s.finished {
		return
	}
	s.finished = true
	for _, k := range s.current {
		e := s.entries[k]
		switch {
		case !e.existed:
			s.added = append(s.added, Change[K, V]{Key: k, New: e.value})
		case s.equal(e.old, e.value):
			s.unchanged = append(s.unchanged, k)
		default:
			s.updated = append(s.updated, Change[K, V]{Key: k, Old: e.old, New: e.value})
		}
		e.existed = true
		var zero V
		e.old = zero
	}
	for _, k := range s.previous {
		e := s.entries[k]
		if e.setIn == s.wave {
			continue
		}
		s.deleted = append(s.deleted, Change[K, V]{Key: k, Old: e.value})
		delete(s.entries, k)
	}
	s.previous, s.current = s.current, s.previous[:0]
}

// Next begins a new wave, finishing the current one first if needed. The change lists of
// the finished wave are discarded.
func (s *Store[K, V]) Next() {
	s.Finish()
	s.finished = false
	s.wave++
	s.added, s.updated, s.deleted, s.unchanged = s.added[:0], s.updated[:0], s.deleted[:0], s.unchanged[:0]
}

// Added returns the keys set in the finished wave that the previous wave did not have, in the
// order they were set. It is empty while a wave is open.
func (s *Store[K, V]) Added() []Change[K, V] { return s.result(s.added) }

// Updated returns the keys whose value differs from the previous wave's, in set order.
func (s *Store[K, V]) Updated() []Change[K, V] { return s.result(s.updated) }

// Deleted returns the keys of the previous wave that the finished wave did not set.
func (s *Store[K, V]) Deleted() []Change[K, V] { return s.result(s.deleted) }

// Unchanged returns the keys set to a value equal to the previous wave's.
func (s *Store[K, V]) Unchanged() []K {
	if !s.finished {
		return nil
	}
	return s.unchanged
}

// Changed reports whether the finished wave added, updated or deleted anything.
func (s *Store[K, V]) Changed() bool {
	return s.finished && len(s.added)+len(s.updated)+len(s.deleted) > 0
}

// Get returns key's value as of the last Set or finished wave.
func (s *Store[K, V]) Get(key K) (V, bool) {
	e, ok := s.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	return e.value, true
}

// Len returns the number of keys the store holds after the last finished wave.
func (s *Store[K, V]) Len() int { return len(s.previous) }

func (s *Store[K, V]) result(list []Change[K, V]) []Change[K, V] {
	if !s.finished {
		return nil
	}
	return list
}
