package diffstore

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type kv struct {
	k string
	v int
}

type result struct {
	Added, Updated, Deleted []Change[string, int]
	Unchanged               []string
}

func TestWaves(t *testing.T) {
	type wave struct {
		set  []kv
		want result
	}
	tests := []struct {
		name  string
		waves []wave
	}{
		{
			name: "first wave adds everything in set order",
			waves: []wave{{
				set:  []kv{{"b", 2}, {"a", 1}},
				want: result{Added: []Change[string, int]{{Key: "b", New: 2}, {Key: "a", New: 1}}},
			}},
		},
		{
			name: "second wave reports update, delete, unchanged and add",
			waves: []wave{
				{set: []kv{{"a", 1}, {"b", 2}, {"c", 3}}, want: result{Added: []Change[string, int]{{Key: "a", New: 1}, {Key: "b", New: 2}, {Key: "c", New: 3}}}},
				{
					set: []kv{{"a", 1}, {"c", 30}, {"d", 4}},
					want: result{
						Added:     []Change[string, int]{{Key: "d", New: 4}},
						Updated:   []Change[string, int]{{Key: "c", Old: 3, New: 30}},
						Deleted:   []Change[string, int]{{Key: "b", Old: 2}},
						Unchanged: []string{"a"},
					},
				},
			},
		},
		{
			name: "setting a key twice keeps the last value",
			waves: []wave{
				{set: []kv{{"a", 1}}, want: result{Added: []Change[string, int]{{Key: "a", New: 1}}}},
				{set: []kv{{"a", 5}, {"a", 1}}, want: result{Unchanged: []string{"a"}}},
			},
		},
		{
			name: "an empty wave deletes everything",
			waves: []wave{
				{set: []kv{{"a", 1}, {"b", 2}}, want: result{Added: []Change[string, int]{{Key: "a", New: 1}, {Key: "b", New: 2}}}},
				{want: result{Deleted: []Change[string, int]{{Key: "a", Old: 1}, {Key: "b", Old: 2}}}},
				{set: []kv{{"a", 1}}, want: result{Added: []Change[string, int]{{Key: "a", New: 1}}}},
			},
		},
		{
			name: "a deleted key that comes back is added again",
			waves: []wave{
				{set: []kv{{"a", 1}}, want: result{Added: []Change[string, int]{{Key: "a", New: 1}}}},
				{set: []kv{{"b", 1}}, want: result{Added: []Change[string, int]{{Key: "b", New: 1}}, Deleted: []Change[string, int]{{Key: "a", Old: 1}}}},
				{set: []kv{{"a", 2}, {"b", 1}}, want: result{Added: []Change[string, int]{{Key: "a", New: 2}}, Unchanged: []string{"b"}}},
			},
		},
		{
			name: "a value changed and changed back is updated twice",
			waves: []wave{
				{set: []kv{{"a", 1}}, want: result{Added: []Change[string, int]{{Key: "a", New: 1}}}},
				{set: []kv{{"a", 2}}, want: result{Updated: []Change[string, int]{{Key: "a", Old: 1, New: 2}}}},
				{set: []kv{{"a", 1}}, want: result{Updated: []Change[string, int]{{Key: "a", Old: 2, New: 1}}}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewComparable[string, int]()
			for i, w := range tc.waves {
				if i > 0 {
					s.Next()
				}
				for _, e := range w.set {
					s.Set(e.k, e.v)
				}
				if got := s.Added(); got != nil {
					t.Fatalf("wave %d: Added before Finish = %v, want nil", i, got)
				}
				s.Finish()
				got := result{Added: s.Added(), Updated: s.Updated(), Deleted: s.Deleted(), Unchanged: s.Unchanged()}
				if diff := cmp.Diff(w.want, got, cmp.Comparer(func(a, b []Change[string, int]) bool {
					return fmt.Sprint(a) == fmt.Sprint(b)
				}), cmp.Comparer(func(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) })); diff != "" {
					t.Fatalf("wave %d (-want +got):\n%s", i, diff)
				}
				wantChanged := len(w.want.Added)+len(w.want.Updated)+len(w.want.Deleted) > 0
				if s.Changed() != wantChanged {
					t.Errorf("wave %d: Changed() = %v, want %v", i, s.Changed(), wantChanged)
				}
				wantLen := len(w.want.Added) + len(w.want.Updated) + len(w.want.Unchanged)
				if s.Len() != wantLen {
					t.Errorf("wave %d: Len() = %d, want %d", i, s.Len(), wantLen)
				}
			}
		})
	}
}

func TestSetAfterFinishStartsNextWave(t *testing.T) {
	s := NewComparable[string, int]()
	s.Set("a", 1)
	s.Finish()
	s.Finish() // idempotent
	if len(s.Added()) != 1 {
		t.Fatalf("Added() = %v, want one entry", s.Added())
	}
	s.Set("b", 2) // begins wave 2 without an explicit Next
	if s.Added() != nil {
		t.Fatalf("Added() while the wave is open = %v, want nil", s.Added())
	}
	s.Finish()
	if got := s.Deleted(); len(got) != 1 || got[0].Key != "a" {
		t.Fatalf("Deleted() = %v, want [a]", got)
	}
	if v, ok := s.Get("b"); !ok || v != 2 {
		t.Fatalf("Get(b) = %v, %v", v, ok)
	}
	if _, ok := s.Get("a"); ok {
		t.Fatalf("Get(a) found a deleted key")
	}
}

func TestCustomEquality(t *testing.T) {
	type svc struct {
		name  string
		ports []int
	}
	s := New[string, svc](func(a, b svc) bool { return a.name == b.name && fmt.Sprint(a.ports) == fmt.Sprint(b.ports) })
	s.Set("x", svc{"x", []int{80}})
	s.Next()
	s.Set("x", svc{"x", []int{80}})
	s.Finish()
	if s.Changed() {
		t.Fatalf("equal slices reported as changed: %+v", s.Updated())
	}
	s.Set("x", svc{"x", []int{80, 443}})
	s.Finish()
	if len(s.Updated()) != 1 {
		t.Fatalf("Updated() = %v, want one entry", s.Updated())
	}
}

// BenchmarkSteadyState measures one wave over 10k keys where one value changes, the common
// case for a backend diffing the full node-local state after a single endpoint change.
func BenchmarkSteadyState(b *testing.B) {
	const n = 10000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns/svc-%d:p80/TCP", i)
	}
	s := NewComparable[string, int]()
	for i, k := range keys {
		s.Set(k, i)
	}
	s.Finish()
	b.ReportAllocs()
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		s.Next()
		for i, k := range keys {
			v := i
			if i == it%n {
				v = -it
			}
			s.Set(k, v)
		}
		s.Finish()
	}
}
