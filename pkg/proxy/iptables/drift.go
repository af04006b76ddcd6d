//go:build linux

package iptables

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	utiliptables "k8s.io/net-utils/iptables"
)

// Drift kinds: the repair metric's label values, a small fixed set.
const (
	// driftChain: one of our chains is missing.
	driftChain = "chain"
	// driftRule: one of our chains holds other rules than we wrote.
	driftRule = "rule"
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
	// On iptables-nft the kernel counts committed nf_tables transactions:
	// when nothing was committed since a check found everything as
	// written, nothing can differ, and the tables need not be read. Read
	// before the tables, so a commit during the read shows next time.
	gen, genOK := uint32(0), false
	if gr, ok := p.syncer.ipt.(utiliptables.GenerationReader); ok {
		g, ok, err := gr.Generation()
		switch {
		case err != nil:
			p.logger.V(2).Info("Could not read the nf_tables generation; comparing the tables", "err", err)
		case ok && c.genValid && g == c.gen:
			return nil, nil
		case ok:
			gen, genOK = g, true
		}
	}
	c.genValid = false
	var drifts []syncshell.Drift
	for _, table := range [...]utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
		// Each save is an exec; a change that arrived since the check
		// started goes first (see syncshell's driftBeforeSync).
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c.reset()
		if table == utiliptables.TableFilter {
			v.expectFilter(c)
		} else {
			v.expectNAT(c)
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
		c.scan(c.buf.Bytes())
		drifts = c.compare(table, v.fingerprints, drifts)
		drifts = c.builtin.jumpDrifts(table, drifts)
	}
	if len(drifts) == 0 && genOK {
		c.gen, c.genValid = gen, true
	}
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
	// gen is the nf_tables generation read before the last check that
	// found nothing, if genValid.
	gen      uint32
	genValid bool
	// index maps a chain's name to its entry in chains.
	index  map[string]int
	chains []wantChain
	// builtin holds the rules of the built-in chains of the table scanned,
	// for the jumps.
	builtin tableState
	// saved is how long each table's last save was.
	saved map[utiliptables.Table]int
}

// wantChain is one of our chains: how many rules we wrote, and what the
// kernel's save shows.
type wantChain struct {
	chain   utiliptables.Chain
	rules   int
	present bool
	found   int
	hash    uint64
}

func (c *driftCheck) reset() {
	if c.index == nil {
		c.index = map[string]int{}
		c.saved = map[utiliptables.Table]int{}
		c.builtin.rules = map[utiliptables.Chain][][]string{}
	}
	clear(c.index)
	c.chains = c.chains[:0]
	clear(c.builtin.rules)
}

// want adds n rules to chain's expected count, adding the chain.
func (c *driftCheck) want(chain utiliptables.Chain, n int) {
	i, ok := c.index[string(chain)]
	if !ok {
		i = len(c.chains)
		c.index[string(chain)] = i
		c.chains = append(c.chains, wantChain{chain: chain})
	}
	c.chains[i].rules += n
}

// wantRules counts the "-A CHAIN" lines of restore input b per chain.
func (c *driftCheck) wantRules(b []byte) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if name := ruleChain(line); name != nil {
			if i, ok := c.index[string(name)]; ok {
				c.chains[i].rules++
			} else {
				c.want(utiliptables.Chain(name), 1)
			}
		}
	}
}

// expectFilter lists our filter chains and their rule counts as restored.
func (v *view) expectFilter(c *driftCheck) {
	for b := v.filterChains.b; len(b) > 0; {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) > 1 && line[0] == ':' {
			name, _, _ := bytes.Cut(line[1:], []byte{' '})
			c.want(utiliptables.Chain(name), 0)
		}
	}
	c.wantRules(v.filterRules.b)
	// kubelet writes KUBE-FIREWALL too; what it adds is not drift.
	if i, ok := c.index[string(kubeletFirewallChain)]; ok {
		c.chains[i].rules = -1
	}
}

// expectNAT lists our nat chains and their rule counts as restored.
func (v *view) expectNAT(c *driftCheck) {
	for _, ch := range natTopChains {
		c.want(ch, 0)
	}
	c.wantRules(v.natTop)
	c.wantRules(v.dispatch.b)
	for _, r := range v.ports {
		for i, ch := range r.chains {
			c.want(ch, int(r.counts[i]))
		}
	}
}

// ruleChain returns the chain of an "-A CHAIN ..." line, or nil.
func ruleChain(line []byte) []byte {
	if len(line) < 4 || line[0] != '-' || line[1] != 'A' || line[2] != ' ' {
		return nil
	}
	name, _, _ := bytes.Cut(line[3:], []byte{' '})
	return name
}

// FNV-1a, inline: hashing the nat table of 10k Services through
// hash.Hash64 costs an interface call per line.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// scan reads an iptables-save of one table: which of the wanted chains
// exist, how many rules each holds and their hash.
func (c *driftCheck) scan(save []byte) {
	for len(save) > 0 {
		line := save
		if i := bytes.IndexByte(save, '\n'); i >= 0 {
			line, save = save[:i], save[i+1:]
		} else {
			save = nil
		}
		switch {
		case len(line) > 1 && line[0] == ':':
			name, _, _ := bytes.Cut(line[1:], []byte{' '})
			if i, ok := c.index[string(name)]; ok {
				w := &c.chains[i]
				w.present = true
				w.hash = fnvOffset
			}
		default:
			name := ruleChain(line)
			if name == nil {
				continue
			}
			i, ok := c.index[string(name)]
			if !ok {
				if builtin := builtinChain(name); builtin != "" {
					words := splitRuleWords(string(line))
					c.builtin.rules[builtin] = append(c.builtin.rules[builtin], words[2:])
				}
				continue
			}
			w := &c.chains[i]
			w.found++
			h := w.hash
			for _, b := range line {
				h = (h ^ uint64(b)) * fnvPrime
			}
			w.hash = (h ^ '\n') * fnvPrime
		}
	}
}

// compare appends to drifts what differs between the wanted chains and the
// save scanned, and takes the fingerprint of chains that have none yet.
func (c *driftCheck) compare(table utiliptables.Table, fingerprints map[chainKey]uint64, drifts []syncshell.Drift) []syncshell.Drift {
	for i := range c.chains {
		w := &c.chains[i]
		key := chainKey{table, w.chain}
		object := string(table) + "/" + string(w.chain)
		switch {
		case !w.present:
			delete(fingerprints, key)
			drifts = append(drifts, syncshell.Drift{Kind: driftChain, Object: object, Expected: rulesText(w.rules), Found: ""})
		case w.rules < 0:
			// Shared with another writer: its existence is all we check.
		case w.found != w.rules:
			delete(fingerprints, key)
			drifts = append(drifts, syncshell.Drift{Kind: driftRule, Object: object, Expected: rulesText(w.rules), Found: rulesText(w.found)})
		default:
			if fp, ok := fingerprints[key]; ok && fp != w.hash {
				drifts = append(drifts, syncshell.Drift{Kind: driftRule, Object: object,
					Expected: rulesText(w.rules) + " as written", Found: rulesText(w.found) + ", changed since"})
				continue
			}
			fingerprints[key] = w.hash
		}
	}
	return drifts
}

func rulesText(n int) string {
	switch {
	case n < 0:
		return "present"
	case n == 1:
		return "1 rule"
	}
	return strconv.Itoa(n) + " rules"
}

// builtinChain returns the built-in chain name names, or "".
func builtinChain(name []byte) utiliptables.Chain {
	if len(name) > len(utiliptables.ChainPostrouting) {
		return "" // without converting: our stale chains and others' are many
	}
	switch c := utiliptables.Chain(name); c {
	case utiliptables.ChainInput, utiliptables.ChainOutput, utiliptables.ChainForward, utiliptables.ChainPrerouting, utiliptables.ChainPostrouting:
		return c
	}
	return ""
}

// jumpDrifts appends the jumps from table's built-in chains to ours that
// the rules of st (as scan collected them) lack.
func (st *tableState) jumpDrifts(table utiliptables.Table, drifts []syncshell.Drift) []syncshell.Drift {
	for _, j := range jumpRules {
		if j.table != table || st.hasJump(j) {
			continue
		}
		drifts = append(drifts, syncshell.Drift{Kind: driftJump,
			Object:   string(table) + "/" + string(j.srcChain) + " -j " + string(j.dstChain),
			Expected: "-A " + string(j.srcChain) + " " + quoteArgs(j.args()), Found: ""})
	}
	return drifts
}
