package nftables

import (
	"context"
	"fmt"
	"io"

	"sigs.k8s.io/knftables"
)

type opVerb uint8

const (
	opAdd opVerb = iota
	opFlush
	opDelete
)

type op struct {
	verb opVerb
	obj  knftables.Object
}

// plan is an ordered list of nft operations grouped into units. A unit is the
// smallest group that must be applied atomically (e.g. "add chain; flush chain;
// add its rules", or "delete element; re-add it with a new value"). Units are
// packed into transactions of bounded size, so that a cold start with tens of
// thousands of objects never holds the nftables lock for a long time, while a
// small sync is still one atomic transaction.
type plan struct {
	ops      []op
	unitEnds []int
}

func (p *plan) add(obj knftables.Object)    { p.ops = append(p.ops, op{opAdd, obj}) }
func (p *plan) flush(obj knftables.Object)  { p.ops = append(p.ops, op{opFlush, obj}) }
func (p *plan) delete(obj knftables.Object) { p.ops = append(p.ops, op{opDelete, obj}) }

// endUnit closes the current unit; a no-op when the unit is empty.
func (p *plan) endUnit() {
	if n := len(p.unitEnds); (n == 0 && len(p.ops) > 0) || (n > 0 && p.unitEnds[n-1] < len(p.ops)) {
		p.unitEnds = append(p.unitEnds, len(p.ops))
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
	for _, end := range p.unitEnds {
		size := end - start
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
			switch o.verb {
			case opAdd:
				tx.Add(o.obj)
			case opFlush:
				tx.Flush(o.obj)
			case opDelete:
				tx.Delete(o.obj)
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

// DryRunInterface wraps a knftables.Interface so that every transaction is
// written to Out, in nft syntax, before being handed to the wrapped
// interface. Wrapping a knftables.NewFake gives a dry run: the proxier keeps
// its bookkeeping consistent (the fake records the "applied" state) while
// nothing touches the kernel. See NewDryRunProxier.
type DryRunInterface struct {
	knftables.Interface
	Out io.Writer
}

// Run writes tx to Out and then runs it on the wrapped interface.
func (d *DryRunInterface) Run(ctx context.Context, tx *knftables.Transaction) error {
	if _, err := io.WriteString(d.Out, tx.String()); err != nil {
		return fmt.Errorf("writing dry-run transaction: %w", err)
	}
	return d.Interface.Run(ctx, tx)
}
