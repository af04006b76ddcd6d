/*
Copyright The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package testing provides an in-memory ipset.Interface for unit tests.
package testing

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"

	"k8s.io/net-utils/ipset"
)

// Messages mirror ipset(8)'s, so ipset.IsNotFoundError classifies the fake's errors as it does
// the real ones.
const (
	msgNoSet        = "The set with the given name does not exist"
	msgSetExists    = "Set cannot be created: set with the same name already exists"
	msgEntryExists  = "Element cannot be added to the set: it's already added"
	msgEntryMissing = "Element cannot be deleted from the set: it's not added"
	msgSwapIncompat = "The sets cannot be swapped: their type does not match"
)

// FakeIPSet is an in-memory ipset.Interface and ipset.Restorer with the kernel's error
// behaviour: operations on a missing set fail, as do duplicate adds and deletes of missing
// entries unless the caller asked to ignore them. Entries are stored as given; unlike the
// kernel, the fake does not canonicalise them (e.g. "1.2.3.4,80" stays distinct from
// "1.2.3.4,tcp:80").
//
// Sets and Entries may be read directly by tests when no other goroutine uses the fake.
type FakeIPSet struct {
	mu sync.Mutex
	// Version is returned by GetVersion.
	Version string
	// Sets maps a set name to its (defaulted) spec.
	Sets map[string]*ipset.IPSet
	// Entries maps a set name to its members.
	Entries map[string]sets.Set[string]
	// Restores counts Restore calls, to assert that a caller batches.
	Restores int
}

var (
	_ ipset.Interface = &FakeIPSet{}
	_ ipset.Restorer  = &FakeIPSet{}
	_ ipset.AllLister = &FakeIPSet{}
)

// NewFake returns an empty FakeIPSet reporting version.
func NewFake(version string) *FakeIPSet {
	return &FakeIPSet{
		Version: version,
		Sets:    map[string]*ipset.IPSet{},
		Entries: map[string]sets.Set[string]{},
	}
}

func (f *FakeIPSet) init() {
	if f.Sets == nil {
		f.Sets = map[string]*ipset.IPSet{}
	}
	if f.Entries == nil {
		f.Entries = map[string]sets.Set[string]{}
	}
}

// GetVersion implements ipset.Interface.
func (f *FakeIPSet) GetVersion() (string, error) {
	return f.Version, nil
}

func errNoSet(op, set string) error {
	return fmt.Errorf("%s ipset %q: %s", op, set, msgNoSet)
}

// FlushSet implements ipset.Interface.
func (f *FakeIPSet) FlushSet(set string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flush(set)
}

func (f *FakeIPSet) flush(set string) error {
	if _, ok := f.Sets[set]; !ok {
		return errNoSet("flushing", set)
	}
	f.Entries[set] = sets.New[string]()
	return nil
}

// DestroySet implements ipset.Interface.
func (f *FakeIPSet) DestroySet(set string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.destroy(set)
}

func (f *FakeIPSet) destroy(set string) error {
	if _, ok := f.Sets[set]; !ok {
		return errNoSet("destroying", set)
	}
	delete(f.Sets, set)
	delete(f.Entries, set)
	return nil
}

// DestroyAllSets implements ipset.Interface.
func (f *FakeIPSet) DestroyAllSets() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Sets = map[string]*ipset.IPSet{}
	f.Entries = map[string]sets.Set[string]{}
	return nil
}

// CreateSet implements ipset.Interface. Like the real one it fills in defaults on set and
// validates it.
func (f *FakeIPSet) CreateSet(set *ipset.IPSet, ignoreExistErr bool) error {
	if set == nil {
		return errors.New("creating ipset: nil set")
	}
	if err := ipset.ValidateName(set.Name); err != nil {
		return err
	}
	var b ipset.Batch
	b.Create(set)
	if err := b.Err(); err != nil {
		return err
	}
	*set = *b.Ops()[0].Spec
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.create(set, ignoreExistErr)
}

func (f *FakeIPSet) create(set *ipset.IPSet, ignoreExist bool) error {
	f.init()
	if _, ok := f.Sets[set.Name]; ok {
		if ignoreExist {
			return nil
		}
		return fmt.Errorf("creating ipset %q: %s", set.Name, msgSetExists)
	}
	f.Sets[set.Name] = set
	f.Entries[set.Name] = sets.New[string]()
	return nil
}

// AddEntry implements ipset.Interface.
func (f *FakeIPSet) AddEntry(entry string, set *ipset.IPSet, ignoreExistErr bool) error {
	if set == nil {
		return fmt.Errorf("adding entry %q: nil set", entry)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.add(set.Name, entry, ignoreExistErr)
}

func (f *FakeIPSet) add(set, entry string, ignoreExist bool) error {
	members, ok := f.Entries[set]
	if !ok {
		return errNoSet("adding to", set)
	}
	if members.Has(entry) && !ignoreExist {
		return fmt.Errorf("adding entry %q to ipset %q: %s", entry, set, msgEntryExists)
	}
	members.Insert(entry)
	return nil
}

// DelEntry implements ipset.Interface.
func (f *FakeIPSet) DelEntry(entry string, set string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.del(set, entry, false)
}

func (f *FakeIPSet) del(set, entry string, ignoreMissing bool) error {
	members, ok := f.Entries[set]
	if !ok {
		return errNoSet("deleting from", set)
	}
	if !members.Has(entry) && !ignoreMissing {
		return fmt.Errorf("deleting entry %q from ipset %q: %s", entry, set, msgEntryMissing)
	}
	members.Delete(entry)
	return nil
}

// TestEntry implements ipset.Interface.
func (f *FakeIPSet) TestEntry(entry string, set string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	members, ok := f.Entries[set]
	if !ok {
		return false, errNoSet("testing entry in", set)
	}
	return members.Has(entry), nil
}

// ListEntries implements ipset.Interface; the result is sorted.
func (f *FakeIPSet) ListEntries(set string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	members, ok := f.Entries[set]
	if !ok {
		return nil, errNoSet("listing", set)
	}
	return sets.List(members), nil
}

// ListAllEntries implements ipset.AllLister; each set's entries are sorted.
func (f *FakeIPSet) ListAllEntries() (map[string][]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	all := make(map[string][]string, len(f.Sets))
	for name := range f.Sets {
		all[name] = sets.List(f.Entries[name])
	}
	return all, nil
}

// ListSets implements ipset.Interface; the result is sorted.
func (f *FakeIPSet) ListSets() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.Sets))
	for name := range f.Sets {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// Restore implements ipset.Restorer, applying operations in order and stopping at the first
// failure, as ipset restore does.
func (f *FakeIPSet) Restore(b *ipset.Batch, ignoreExist bool) error {
	if b == nil {
		return nil
	}
	if err := b.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Restores++
	f.init()
	for i, op := range b.Ops() {
		var err error
		switch op.Kind {
		case ipset.OpCreate:
			spec := *op.Spec
			err = f.create(&spec, ignoreExist)
		case ipset.OpAdd:
			err = f.add(op.Set, op.Entry, ignoreExist)
		case ipset.OpDel:
			err = f.del(op.Set, op.Entry, ignoreExist)
		case ipset.OpFlush:
			err = f.flush(op.Set)
		case ipset.OpDestroy:
			err = f.destroy(op.Set)
		case ipset.OpSwap:
			err = f.swap(op.Set, op.Other)
		default:
			err = fmt.Errorf("unknown operation %q", op.Kind)
		}
		if err != nil {
			return &ipset.RestoreError{Line: i + 1, Op: op.String(), Output: err.Error(), Err: errors.New("exit status 1")}
		}
	}
	return nil
}

func (f *FakeIPSet) swap(a, b string) error {
	sa, okA := f.Sets[a]
	sb, okB := f.Sets[b]
	if !okA {
		return errNoSet("swapping", a)
	}
	if !okB {
		return errNoSet("swapping", b)
	}
	if sa.SetType != sb.SetType || sa.HashFamily != sb.HashFamily {
		return fmt.Errorf("swapping ipsets %q and %q: %s", a, b, msgSwapIncompat)
	}
	// The kernel swaps everything but the names.
	na, nb := *sb, *sa
	na.Name, nb.Name = a, b
	f.Sets[a], f.Sets[b] = &na, &nb
	f.Entries[a], f.Entries[b] = f.Entries[b], f.Entries[a]
	return nil
}
