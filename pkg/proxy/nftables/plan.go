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

// elemOp is one element of one of the view's containers. It becomes a
// knftables.Element (its key and value split into fields) only when its
// transaction or netlink batch is built: a full sync at 10k Services plans
// ~35k of them, and planning them as knftables.Elements kept the live heap
// at the first transaction at 101.5 MiB instead of 98.6
// (BenchmarkFirstSyncLiveHeap).
type elemOp struct {
	c       container
	key     string
	value   string // "" when deleting
	comment *string
}

func (e *elemOp) element() *knftables.Element { return e.c.element(e.key, e.value, e.comment) }

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
	// pace, if set, is called every paceUnits units: a full sync's
	// HeapPacer, so that planning a cold start (~100k units at 10k
	// Services, most of them kept until applied) does not pile its garbage
	// on top of them.
	pace func()
}

const paceUnits = 1024

func (pl *plan) add(obj knftables.Object)    { pl.push(op{opAdd, obj}, 1) }
func (pl *plan) flush(obj knftables.Object)  { pl.push(op{opFlush, obj}, 1) }
func (pl *plan) delete(obj knftables.Object) { pl.push(op{opDelete, obj}, 1) }

// addElement adds (or, with an existing key, replaces the value of) an
// element of container c.
func (pl *plan) addElement(c container, key, value string, comment *string) {
	pl.push(op{opAdd, &elemOp{c: c, key: key, value: value, comment: comment}}, 1)
}

// deleteElement deletes the element of container c with key.
func (pl *plan) deleteElement(c container, key string) {
	pl.push(op{opDelete, &elemOp{c: c, key: key}}, 1)
}

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
		if pl.pace != nil && len(pl.unitEnds)%paceUnits == 0 {
			pl.pace()
		}
	}
}

func (pl *plan) empty() bool { return len(pl.ops) == 0 }

// eachGroup cuts the plan, in order and at unit boundaries, into groups of
// consecutive units of one kind and hands each group's operations to fn,
// releasing them afterwards so that a cold start never has every
// transaction (and its rendering) in memory at once. A unit is an element
// unit when isElements says so (nil: none is); a group holds at most maxOps
// expanded operations, or maxNetlinkElements for element units (a larger
// unit gets a group of its own; maxOps <= 0 means no bound). It stops at
// fn's first error.
func (pl *plan) eachGroup(maxOps int, isElements func(ops []op, size int) bool, fn func(ops []op, elements bool) error) error {
	pl.endUnit()
	groupStart, groupSize, groupElements := 0, 0, false
	flush := func(end int) error {
		if end == groupStart {
			return nil
		}
		ops := pl.ops[groupStart:end]
		err := fn(ops, groupElements)
		clear(ops)
		groupStart, groupSize = end, 0
		return err
	}
	start := 0
	for i, end := range pl.unitEnds {
		size := pl.unitSizes[i]
		elements := isElements != nil && isElements(pl.ops[start:end], size)
		limit := maxOps
		if elements {
			limit = maxNetlinkElements
		}
		if groupSize > 0 && (elements != groupElements || (limit > 0 && groupSize+size > limit)) {
			if err := flush(start); err != nil {
				return err
			}
		}
		if groupSize == 0 {
			groupElements = elements
		}
		groupSize += size
		start = end
	}
	return flush(len(pl.ops))
}

// moveUnitsLast reorders the plan so that the units isLast says so of come
// after all the others, each kind keeping its order. The plan is then no
// longer safe to cut between units (a rule may reach a map whose elements
// come later), so only a plan for a table that is not there may use it.
func (pl *plan) moveUnitsLast(isLast func(ops []op, size int) bool) {
	pl.endUnit()
	// Sized up front: at 10k Services a cold start's plan is ~90k
	// operations, and growing copies by appending allocated ~7 MB.
	first, last := make([]int, 0, len(pl.unitEnds)), make([]int, 0, len(pl.unitEnds))
	for i, end := range pl.unitEnds {
		if isLast(pl.ops[pl.unitStartOf(i):end], pl.unitSizes[i]) {
			last = append(last, i)
		} else {
			first = append(first, i)
		}
	}
	out := plan{ops: make([]op, 0, len(pl.ops)), unitEnds: make([]int, 0, len(pl.unitEnds)), unitSizes: make([]int, 0, len(pl.unitSizes))}
	for _, i := range append(first, last...) {
		out.ops = append(out.ops, pl.ops[pl.unitStartOf(i):pl.unitEnds[i]]...)
		out.size += pl.unitSizes[i]
		out.endUnit()
	}
	*pl = out
}

// unitStartOf is the index of unit i's first op.
func (pl *plan) unitStartOf(i int) int {
	if i == 0 {
		return 0
	}
	return pl.unitEnds[i-1]
}

// transaction builds one nft transaction of ops, expanding slot batches.
func transaction(nft knftables.Interface, ops []op) *knftables.Transaction {
	tx := nft.NewTransaction()
	for _, o := range ops {
		switch obj := o.obj.(type) {
		case *slotBatch:
			for i := obj.from; i < obj.to; i++ {
				apply(tx, o.verb, obj.element(i))
			}
		case *elemOp:
			apply(tx, o.verb, obj.element())
		default:
			apply(tx, o.verb, obj.(knftables.Object))
		}
	}
	return tx
}

// each packs the whole plan into nft transactions of at most maxOps
// operations and hands them to fn one at a time, stopping at fn's first
// error.
func (pl *plan) each(nft knftables.Interface, maxOps int, fn func(tx *knftables.Transaction) error) error {
	return pl.eachGroup(maxOps, nil, func(ops []op, _ bool) error { return fn(transaction(nft, ops)) })
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

// elementsOnly reports whether every operation of the plan adds or deletes
// elements an elementWriter can write (see writable). Endpoint map
// slots and hairpin-connections elements change with endpoints, so the
// commonest partial plan is made only of them.
func (pl *plan) elementsOnly() bool {
	return len(pl.ops) > 0 && allElements(pl.ops)
}

// allElements reports whether an elementWriter can apply every one of ops.
func allElements(ops []op) bool {
	for _, o := range ops {
		if o.verb == opFlush {
			return false
		}
		switch obj := o.obj.(type) {
		case *slotBatch:
		case *elemOp:
			if !writable(obj) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// writable reports whether an elementWriter encodes e: an element of
// hairpin-connections or of the dispatch sets and maps every Service has an
// element in (cluster-ips, service-ips, service-nodeports; keyFields),
// without a comment. Together with the slots they are ~90% of a full sync's
// statements. The rarer sets and maps (LoadBalancer firewalls, Services
// without endpoints) stay with nft.
func writable(e *elemOp) bool {
	_, ok := keyFields[containerNames[e.c]]
	return ok && e.comment == nil
}

// containerOrder is the order in which a plan adds elements: the
// containers' own. With element batches over netlink it is
// netlinkContainerOrder, the containers a writer carries (keyFields) first,
// so that their elements form one run of element units.
var containerOrder, netlinkContainerOrder = containerOrders()

func containerOrders() (own, netlinkFirst [numContainers]container) {
	var first, rest []container
	for c := range numContainers {
		own[c] = c
		if _, ok := keyFields[containerNames[c]]; ok {
			first = append(first, c)
		} else {
			rest = append(rest, c)
		}
	}
	copy(netlinkFirst[:], append(first, rest...))
	return own, netlinkFirst
}

// elementUnit says which units of a plan cut into several transactions go
// over netlink: those an elementWriter can apply, up to a batch in size. A
// full sync at 1k Services holds ~11k endpoint and hairpin elements; one nft
// command each, they were 60% of nft's time for that sync (measured: 380 ms
// for the whole transaction, 155 ms without them), while the kernel takes
// them in a few large messages. The view creates the endpoint maps before
// the slots (view.netlinkOrder), so the slots are one run of element units,
// and the dispatch elements, which come after every chain, another.
func elementUnit(ops []op, size int) bool {
	return size <= maxNetlinkElements && allElements(ops)
}
