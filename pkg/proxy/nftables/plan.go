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

func (p *plan) add(obj knftables.Object)    { p.push(op{opAdd, obj}, 1) }
func (p *plan) flush(obj knftables.Object)  { p.push(op{opFlush, obj}, 1) }
func (p *plan) delete(obj knftables.Object) { p.push(op{opDelete, obj}, 1) }

// addSlots adds the elements of slots from..to-1 of a range holding values.
func (p *plan) addSlots(name string, base uint32, values []string, from, to int) {
	if from < to {
		p.push(op{opAdd, &slotBatch{name: name, base: base, from: from, to: to, values: values}}, to-from)
	}
}

// deleteSlots deletes the elements of slots from..to-1 of a range.
func (p *plan) deleteSlots(name string, base uint32, from, to int) {
	if from < to {
		p.push(op{opDelete, &slotBatch{name: name, base: base, from: from, to: to}}, to-from)
	}
}

func (p *plan) push(o op, n int) {
	p.ops = append(p.ops, o)
	p.size += n
}

// endUnit closes the current unit; a no-op when the unit is empty.
func (p *plan) endUnit() {
	if n := len(p.unitEnds); (n == 0 && len(p.ops) > 0) || (n > 0 && p.unitEnds[n-1] < len(p.ops)) {
		p.unitEnds = append(p.unitEnds, len(p.ops))
		p.unitSizes = append(p.unitSizes, p.size-p.unitStart)
		p.unitStart = p.size
	}
}

func (p *plan) empty() bool { return len(p.ops) == 0 }

// chunkEnds returns the op index at which each transaction ends when the plan
// is packed into transactions of at most maxOps operations (a single unit
// larger than maxOps gets a transaction of its own). maxOps <= 0 means one
// transaction.
func (p *plan) chunkEnds(maxOps int) []int {
	p.endUnit()
	if len(p.ops) == 0 {
		return nil
	}
	var ends []int
	n, start := 0, 0
	for u, end := range p.unitEnds {
		size := p.unitSizes[u]
		if maxOps > 0 && n > 0 && n+size > maxOps {
			ends = append(ends, start)
			n = 0
		}
		n += size
		start = end
	}
	return append(ends, len(p.ops))
}

// each builds the plan's transactions one at a time and hands each to fn,
// stopping at fn's first error. Transactions are built lazily and the plan
// lets go of the objects of each one handed over, so a cold start never has
// every transaction (and its rendering) in memory at once.
func (p *plan) each(nft knftables.Interface, maxOps int, fn func(i, total int, tx *knftables.Transaction) error) error {
	ends := p.chunkEnds(maxOps)
	start := 0
	for i, end := range ends {
		tx := nft.NewTransaction()
		for j := start; j < end; j++ {
			o := p.ops[j]
			if b, ok := o.obj.(*slotBatch); ok {
				for i := b.from; i < b.to; i++ {
					apply(tx, o.verb, b.element(i))
				}
			} else {
				apply(tx, o.verb, o.obj.(knftables.Object))
			}
			p.ops[j] = op{}
		}
		if err := fn(i, len(ends), tx); err != nil {
			return err
		}
		start = end
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
