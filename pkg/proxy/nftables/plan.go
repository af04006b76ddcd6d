//go:build linux

package nftables

import (
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

type opVerb uint8

const (
	opAdd opVerb = iota
	opFlush
	opDelete
)

// op is one nft operation, or a batch of endpoint map element operations
// (obj is then a *slotBatch) that is expanded only when its transaction is
// built: a cold start writes one element per endpoint, and holding a
// knftables.Element for each of them at once would dominate the peak memory.
type op struct {
	verb opVerb
	obj  any // knftables.Object or *slotBatch
}

// slotBatch adds (values set) or deletes (values nil) the elements of slots
// base+from .. base+to-1 of endpoint map name.
type slotBatch struct {
	name     string
	base     uint32
	from, to int
	values   []string // "ip . port" per slot, indexed from base
}

// element is the batch's element for slot base+i.
func (b *slotBatch) element(i int) *knftables.Element {
	e := &knftables.Element{Map: b.name, Key: []string{strconv.FormatUint(uint64(b.base)+uint64(i), 10)}}
	if b.values != nil {
		e.Value = strings.Split(b.values[i], " . ")
	}
	return e
}

// plan is an ordered list of nft operations grouped into units. A unit is the
// smallest group that must be applied atomically (e.g. "add chain; flush chain;
// add its rules", or "delete element; re-add it with a new value"). Units are
// packed into transactions of bounded size, so that a cold start with tens of
// thousands of objects never holds the nftables lock for a long time, while a
// small sync is still one atomic transaction. Sizes count expanded operations.
type plan struct {
	ops       []op
	size      int
	unitEnds  []int // op index after each unit
	unitSizes []int
	unitStart int // size at the start of the open unit
}

func (pl *plan) add(obj knftables.Object)    { pl.push(op{opAdd, obj}, 1) }
func (pl *plan) flush(obj knftables.Object)  { pl.push(op{opFlush, obj}, 1) }
func (pl *plan) delete(obj knftables.Object) { pl.push(op{opDelete, obj}, 1) }

// addSlots adds the elements of slots from..to-1 of a range holding values.
func (pl *plan) addSlots(name string, base uint32, values []string, from, to int) {
	if from < to {
		pl.push(op{opAdd, &slotBatch{name: name, base: base, from: from, to: to, values: values}}, to-from)
	}
}

// deleteSlots deletes the elements of slots from..to-1 of a range.
func (pl *plan) deleteSlots(name string, base uint32, from, to int) {
	if from < to {
		pl.push(op{opDelete, &slotBatch{name: name, base: base, from: from, to: to}}, to-from)
	}
}

func (pl *plan) push(o op, n int) {
	pl.ops = append(pl.ops, o)
	pl.size += n
}

// endUnit closes the current unit; a no-op when the unit is empty.
func (pl *plan) endUnit() {
	if n := len(pl.unitEnds); (n == 0 && len(pl.ops) > 0) || (n > 0 && pl.unitEnds[n-1] < len(pl.ops)) {
		pl.unitEnds = append(pl.unitEnds, len(pl.ops))
		pl.unitSizes = append(pl.unitSizes, pl.size-pl.unitStart)
		pl.unitStart = pl.size
	}
}

func (pl *plan) empty() bool { return len(pl.ops) == 0 }

// unit is one unit of a plan: operations [start, end), size expanded ones.
type unit struct{ start, end, size int }

// units closes the open unit and returns every unit in plan order.
func (pl *plan) units() []unit {
	pl.endUnit()
	us := make([]unit, len(pl.unitEnds))
	start := 0
	for i, end := range pl.unitEnds {
		us[i] = unit{start: start, end: end, size: pl.unitSizes[i]}
		start = end
	}
	return us
}

// pack cuts units, in order, into groups of at most max expanded operations
// (a unit larger than max gets a group of its own); max <= 0 means one group.
func pack(us []unit, max int) [][]unit {
	var groups [][]unit
	n, first := 0, 0
	for i, u := range us {
		if max > 0 && n > 0 && n+u.size > max {
			groups = append(groups, us[first:i])
			n, first = 0, i
		}
		n += u.size
	}
	if first < len(us) {
		groups = append(groups, us[first:])
	}
	return groups
}

// opsOf returns the operations of units, in order.
func (pl *plan) opsOf(us []unit) []op {
	var ops []op
	for _, u := range us {
		ops = append(ops, pl.ops[u.start:u.end]...)
	}
	return ops
}

// release lets go of the objects of units that have been applied, so a cold
// start never has every transaction (and its rendering) in memory at once.
func (pl *plan) release(us []unit) {
	for _, u := range us {
		clear(pl.ops[u.start:u.end])
	}
}

// transaction builds one nft transaction of ops, expanding slot batches.
func transaction(nft knftables.Interface, ops []op) *knftables.Transaction {
	tx := nft.NewTransaction()
	for _, o := range ops {
		if b, ok := o.obj.(*slotBatch); ok {
			for i := b.from; i < b.to; i++ {
				apply(tx, o.verb, b.element(i))
			}
		} else {
			apply(tx, o.verb, o.obj.(knftables.Object))
		}
	}
	return tx
}

// each packs the plan into transactions of at most maxOps operations and
// hands them to fn one at a time, stopping at fn's first error. Transactions
// are built lazily and released once handed over.
func (pl *plan) each(nft knftables.Interface, maxOps int, fn func(i, total int, tx *knftables.Transaction) error) error {
	groups := pack(pl.units(), maxOps)
	for i, g := range groups {
		tx := transaction(nft, pl.opsOf(g))
		pl.release(g)
		if err := fn(i, len(groups), tx); err != nil {
			return err
		}
	}
	return nil
}

func apply(tx *knftables.Transaction, verb opVerb, obj knftables.Object) {
	switch verb {
	case opAdd:
		tx.Add(obj)
	case opFlush:
		tx.Flush(obj)
	case opDelete:
		tx.Delete(obj)
	}
}
