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

package ipset

import (
	"fmt"
	"io"
	"strings"
)

// OpKind is the kind of a batched operation.
type OpKind string

// Batched operations, spelt as in ipset restore input.
const (
	OpCreate  OpKind = "create"
	OpAdd     OpKind = "add"
	OpDel     OpKind = "del"
	OpFlush   OpKind = "flush"
	OpDestroy OpKind = "destroy"
	OpSwap    OpKind = "swap"
)

// Op is one batched operation.
type Op struct {
	Kind OpKind
	// Set is the set operated on.
	Set string
	// Entry is the member for OpAdd and OpDel.
	Entry string
	// Spec is the set to create for OpCreate (defaults filled in).
	Spec *IPSet
	// Other is the second set of OpSwap.
	Other string
}

// String renders the operation as a line of ipset restore input.
func (o Op) String() string {
	switch o.Kind {
	case OpCreate:
		return "create " + strings.Join(o.Spec.createArgs(), " ")
	case OpAdd, OpDel:
		return string(o.Kind) + " " + o.Set + " " + o.Entry
	case OpSwap:
		return "swap " + o.Set + " " + o.Other
	}
	return string(o.Kind) + " " + o.Set
}

// Batch collects operations for Restorer.Restore. The first invalid operation is remembered,
// later ones are dropped, and Restore returns the error without running anything, so a
// caller can build a batch without checking each step.
type Batch struct {
	ops []Op
	err error
}

// Err returns the first error recorded while building the batch.
func (b *Batch) Err() error { return b.err }

// Len returns the number of operations.
func (b *Batch) Len() int { return len(b.ops) }

// Ops returns the operations in order. The slice must not be modified.
func (b *Batch) Ops() []Op { return b.ops }

// Reset empties the batch for reuse, keeping its capacity.
func (b *Batch) Reset() {
	b.ops = b.ops[:0]
	b.err = nil
}

func (b *Batch) push(op Op, names ...string) {
	if b.err != nil {
		return
	}
	for _, n := range names {
		if err := ValidateName(n); err != nil {
			b.err = fmt.Errorf("batch operation %d (%s): %w", len(b.ops)+1, op.Kind, err)
			return
		}
	}
	if op.Kind == OpAdd || op.Kind == OpDel {
		// A space or newline in an entry would inject words or lines into restore's input.
		if op.Entry == "" || strings.ContainsFunc(op.Entry, isSpaceOrControl) {
			b.err = fmt.Errorf("batch operation %d (%s %s): invalid entry %q", len(b.ops)+1, op.Kind, op.Set, op.Entry)
			return
		}
	}
	b.ops = append(b.ops, op)
}

// Create adds the creation of set. Defaults are filled in on a copy, then validated.
func (b *Batch) Create(set *IPSet) {
	spec := *set
	spec.setIPSetDefaults()
	if b.err == nil {
		if err := spec.Validate(); err != nil {
			b.err = fmt.Errorf("batch operation %d (create): %w", len(b.ops)+1, err)
			return
		}
	}
	b.push(Op{Kind: OpCreate, Set: spec.Name, Spec: &spec}, spec.Name)
}

// Add adds entry to set.
func (b *Batch) Add(set, entry string) { b.push(Op{Kind: OpAdd, Set: set, Entry: entry}, set) }

// Del deletes entry from set.
func (b *Batch) Del(set, entry string) { b.push(Op{Kind: OpDel, Set: set, Entry: entry}, set) }

// Flush empties set.
func (b *Batch) Flush(set string) { b.push(Op{Kind: OpFlush, Set: set}, set) }

// Destroy deletes set.
func (b *Batch) Destroy(set string) { b.push(Op{Kind: OpDestroy, Set: set}, set) }

// Swap exchanges the contents of two sets of the same type: the way to replace a set's
// members atomically is to fill a temporary set, swap, and destroy the temporary one.
func (b *Batch) Swap(set, other string) {
	b.push(Op{Kind: OpSwap, Set: set, Other: other}, set, other)
}

// WriteTo writes the batch in ipset restore syntax, one operation per line, without the
// COMMIT line that only recent ipset versions accept.
func (b *Batch) WriteTo(w io.Writer) (int64, error) {
	if b.err != nil {
		return 0, b.err
	}
	var sb strings.Builder
	for _, op := range b.ops {
		sb.WriteString(op.String())
		sb.WriteByte('\n')
	}
	n, err := io.WriteString(w, sb.String())
	return int64(n), err
}
