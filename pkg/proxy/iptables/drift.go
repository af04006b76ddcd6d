//go:build linux

package iptables

import (
	"bytes"
	"context"
	"fmt"

	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	"k8s.io/kube-proxy/pkg/proxy/util/chaincheck"
	"k8s.io/kube-proxy/pkg/proxy/util/jumprules"
	utiliptables "k8s.io/net-utils/iptables"
)

// Drift kinds: the repair metric's label values, a small fixed set. A chain
// missing or holding other rules than written is found by chaincheck, as
// in ipvs mode.
const (
	driftChain = string(chaincheck.KindChain)
	driftRule  = string(chaincheck.KindRule)
	// driftJump: a jump from a built-in chain to ours is missing.
	driftJump = "jump"
)

var _ syncshell.DriftChecker = &rulesBackend{}

// Drift compares what the restores wrote (the view) with one iptables-save
// of the filter and the nat table: every chain we own must exist with the
// number of rules we wrote, each jump from a built-in chain must be there,
// and a chain whose rules a previous check saw as written (its fingerprint)
// must still hash to them. Chains that are not ours, rules other software
// adds to the built-in chains, and our chains waiting to be deleted are not
// compared.
//
// The kernel spells a rule differently from the restore input, so rules
// are not compared text to text: a chain written since the last check is
// compared by its rule count only, and its fingerprint taken; from then on
// any change of its rules is seen, until a sync rewrites it. Only a rule
// replaced in place (same count) between a write and the next check goes
// unnoticed for that chain, until it is written again.
//
// On iptables-nft, a check that finds the kernel's nf_tables generation
// unchanged since the last check that found nothing reads nothing more:
// no rule can have changed (the proxier's own restores change it too).
//
// It reports nothing while the view is not trusted (before the first
// successful sync, after a failed one): the next sync is full anyway.
func (b *rulesBackend) Drift(ctx context.Context) ([]syncshell.Drift, error) {
	p := (*Proxier)(b)
	v := p.view
	if !v.valid {
		return nil, nil
	}
	c := &p.driftCheck
	if c.gen.Unchanged(p.syncer.ipt, p.logger) {
		return nil, nil
	}
	if c.saved == nil {
		c.saved = map[utiliptables.Table]int{}
	}
	var drifts []syncshell.Drift
	for _, table := range [...]utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
		// Each save is an exec; a change that arrived since the check
		// started goes first (see syncshell's driftBeforeSync).
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c.chains.Reset(table)
		c.builtin.Reset()
		if table == utiliptables.TableFilter {
			v.expectFilter(&c.chains)
		} else {
			v.expectNAT(&c.chains)
		}
		c.buf.Reset()
		// Sized for what the last save of this table printed, so a 40 MB
		// nat table is read into one allocation instead of a doubling
		// series of them (which raised a 10k-Service proxier's peak RSS).
		c.buf.Grow(c.saved[table] + c.saved[table]/8)
		if err := p.syncer.ipt.SaveInto(table, &c.buf); err != nil {
			return nil, fmt.Errorf("reading the %s table to compare it with the rules written: %w", table, err)
		}
		c.saved[table] = c.buf.Len()
		c.chains.Scan(c.buf.Bytes(), c.builtinRule)
		c.diffs = c.chains.Compare(v.fingerprints, c.diffs[:0])
		for _, d := range c.diffs {
			drifts = append(drifts, syncshell.Drift{Kind: string(d.Kind), Object: d.Key.Object(), Expected: d.Expected, Found: d.Found})
		}
		drifts = jumpDrifts(&c.builtin, table, drifts)
	}
	c.gen.Done(len(drifts) == 0)
	if c.buf.Cap() > keptRestoreBytes {
		// The nat table of a large cluster; kept, it would double the
		// proxier's heap between checks.
		c.buf = bytes.Buffer{}
	}
	return drifts, nil
}

// driftCheck is the drift check's scratch space, kept between checks.
type driftCheck struct {
	buf bytes.Buffer
	// gen spares a check on iptables-nft when nothing was committed
	// since the last one that found nothing.
	gen chaincheck.Generation
	// chains compares our chains of the table being checked.
	chains chaincheck.Check
	diffs  []chaincheck.Difference
	// builtin holds the rules of the built-in chains of the table scanned,
	// for the jumps.
	builtin jumprules.TableState
	// saved is how long each table's last save was.
	saved map[utiliptables.Table]int
}

// builtinRule keeps a rule of a built-in chain, which Scan hands over as
// not ours, for the jump check.
func (c *driftCheck) builtinRule(name, line []byte) {
	if jumprules.BuiltinChain(name) != "" {
		c.builtin.AddRule(line)
	}
}

// expectFilter lists our filter chains and their rule counts as restored.
func (v *view) expectFilter(c *chaincheck.Check) {
	c.WantDeclared(v.filterChains.b)
	c.WantRules(v.filterRules.b)
	// kubelet writes KUBE-FIREWALL too; what it adds is not drift.
	c.Share(kubeletFirewallChain)
}

// expectNAT lists our nat chains and their rule counts as restored.
func (v *view) expectNAT(c *chaincheck.Check) {
	for _, ch := range natTopChains {
		c.Want(ch, 0)
	}
	c.WantRules(v.natTop)
	c.WantRules(v.dispatch.b)
	for _, r := range v.ports {
		for i, ch := range r.chains {
			c.Want(ch, int(r.counts[i]))
		}
	}
}

// jumpDrifts appends the jumps from table's built-in chains to ours that
// the rules of st (as Scan handed them to builtinRule) lack.
func jumpDrifts(st *jumprules.TableState, table utiliptables.Table, drifts []syncshell.Drift) []syncshell.Drift {
	for _, j := range st.MissingJumps(table, jumpRules) {
		drifts = append(drifts, syncshell.Drift{Kind: driftJump, Object: j.Name(), Expected: j.Rule()})
	}
	return drifts
}
