package chaincheck

import (
	"bytes"
	"strconv"

	"k8s.io/klog/v2"
	utiliptables "k8s.io/net-utils/iptables"
)

// Key names a chain in a table.
type Key struct {
	Table utiliptables.Table
	Chain utiliptables.Chain
}

// Object is how a drift report names the chain: "table/chain".
func (k Key) Object() string { return string(k.Table) + "/" + string(k.Chain) }

// Kind says what differs. Its values are the drift metric's label values,
// which both proxiers share.
type Kind string

const (
	// KindChain: a chain we wrote is missing.
	KindChain Kind = "chain"
	// KindRule: a chain holds other rules than we wrote.
	KindRule Kind = "rule"
)

// Difference is one chain found otherwise than written.
type Difference struct {
	Kind     Kind
	Key      Key
	Expected string
	Found    string
}

// Shared is the rule count of a chain that another program writes to as
// well (kubelet's KUBE-FIREWALL; see Share): only its existence is checked.
const Shared = -1

// Check is one table's comparison: the chains wanted, then what a save of
// the table shows of them. Its memory is reused from one check to the next,
// since a large cluster's nat table has tens of thousands of chains.
type Check struct {
	table utiliptables.Table
	// index maps a chain's name to its entry in chains.
	index  map[string]int
	chains []chain
}

// chain is one wanted chain: how many rules were written, and what the save
// shows.
type chain struct {
	name    utiliptables.Chain
	rules   int
	present bool
	found   int
	hash    uint64
}

// Reset forgets the wanted chains and starts a check of table.
func (c *Check) Reset(table utiliptables.Table) {
	if c.index == nil {
		c.index = map[string]int{}
	}
	clear(c.index)
	c.chains = c.chains[:0]
	c.table = table
}

// Want adds n rules to name's expected count, adding the chain if it is not
// wanted yet; n = 0 only declares it.
func (c *Check) Want(name utiliptables.Chain, n int) {
	i, ok := c.index[string(name)]
	if !ok {
		i = len(c.chains)
		c.index[string(name)] = i
		c.chains = append(c.chains, chain{name: name})
	}
	c.chains[i].rules += n
}

// Share marks a wanted chain as written by another program too: only its
// existence is compared. A chain not wanted stays so. Call it after the
// chain's rules were counted.
func (c *Check) Share(name utiliptables.Chain) {
	if i, ok := c.index[string(name)]; ok {
		c.chains[i].rules = Shared
	}
}

// WantDeclared declares every chain restore input declares (":CHAIN ..."
// lines), with no rules.
func (c *Check) WantDeclared(input []byte) {
	for line, rest := nextLine(input); line != nil || len(rest) > 0; line, rest = nextLine(rest) {
		if len(line) > 1 && line[0] == ':' {
			name, _, _ := bytes.Cut(line[1:], []byte{' '})
			c.Want(utiliptables.Chain(name), 0)
		}
	}
}

// WantRules counts the rules ("-A CHAIN ..." lines) of restore input per
// chain, adding the chains not wanted yet.
func (c *Check) WantRules(input []byte) {
	for line, rest := nextLine(input); line != nil || len(rest) > 0; line, rest = nextLine(rest) {
		if name := RuleChain(line); name != nil {
			if i, ok := c.index[string(name)]; ok {
				c.chains[i].rules++
			} else {
				c.Want(utiliptables.Chain(name), 1)
			}
		}
	}
}

// WantTable wants the chains a whole restore input declares in the check's
// table ("*table" section), with the rules it appends to them. Rules
// appended to chains the section does not declare (built-in chains) are not
// ours alone and are not counted.
func (c *Check) WantTable(input []byte) {
	in := false
	for line, rest := nextLine(input); line != nil || len(rest) > 0; line, rest = nextLine(rest) {
		switch {
		case len(line) > 1 && line[0] == '*':
			in = string(line[1:]) == string(c.table)
		case !in:
		case len(line) > 1 && line[0] == ':':
			name, _, _ := bytes.Cut(line[1:], []byte{' '})
			c.Want(utiliptables.Chain(name), 0)
		default:
			if name := RuleChain(line); name != nil {
				if i, ok := c.index[string(name)]; ok {
					c.chains[i].rules++
				}
			}
		}
	}
}

// nextLine splits b at its first newline: the line (nil when b is empty)
// and the rest.
func nextLine(b []byte) (line, rest []byte) {
	if len(b) == 0 {
		return nil, nil
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// RuleChain returns the chain of an "-A CHAIN ..." line, or nil.
func RuleChain(line []byte) []byte {
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

// Scan reads an iptables-save of the check's table: which wanted chains
// exist, how many rules each holds and a hash of them in the save's
// spelling. other, if not nil, is handed each rule of a chain not wanted
// (the built-in chains' jumps, for the caller to check); its line is only
// valid during the call.
func (c *Check) Scan(save []byte, other func(chain, line []byte)) {
	for line, rest := nextLine(save); line != nil || len(rest) > 0; line, rest = nextLine(rest) {
		if len(line) > 1 && line[0] == ':' {
			name, _, _ := bytes.Cut(line[1:], []byte{' '})
			if i, ok := c.index[string(name)]; ok {
				c.chains[i].present, c.chains[i].hash = true, fnvOffset
			}
			continue
		}
		name := RuleChain(line)
		if name == nil {
			continue
		}
		i, ok := c.index[string(name)]
		if !ok {
			if other != nil {
				other(name, line)
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

// Compare appends to out what differs between the wanted chains and the
// save scanned, in the order the chains were wanted. The kernel spells a
// rule differently from the restore input, so rules are not compared text
// to text: a chain without a fingerprint is compared by its rule count and
// its fingerprint taken; from then on any change of its rules is seen,
// until the caller deletes the fingerprint because it rewrote the chain.
func (c *Check) Compare(fingerprints map[Key]uint64, out []Difference) []Difference {
	for i := range c.chains {
		w := &c.chains[i]
		key := Key{c.table, w.name}
		switch {
		case !w.present:
			delete(fingerprints, key)
			out = append(out, Difference{Kind: KindChain, Key: key, Expected: RulesText(w.rules)})
		case w.rules == Shared:
			// Shared with another writer: its existence is all we check.
		case w.found != w.rules:
			delete(fingerprints, key)
			out = append(out, Difference{Kind: KindRule, Key: key, Expected: RulesText(w.rules), Found: RulesText(w.found)})
		default:
			if fp, ok := fingerprints[key]; ok && fp != w.hash {
				out = append(out, Difference{Kind: KindRule, Key: key,
					Expected: RulesText(w.rules) + " as written", Found: RulesText(w.found) + ", changed since"})
				continue
			}
			fingerprints[key] = w.hash
		}
	}
	return out
}

// RulesText spells a rule count for a drift report.
func RulesText(n int) string {
	switch {
	case n == Shared:
		return "present"
	case n == 1:
		return "1 rule"
	}
	return strconv.Itoa(n) + " rules"
}

// Generation remembers the nf_tables generation read before the last check
// that found every chain as written. On iptables-nft the kernel counts the
// committed nf_tables transactions, whoever commits them: while the count
// has not moved, no rule can differ, and the tables need not be read.
type Generation struct {
	gen, pending     uint32
	valid, pendingOK bool
}

// Unchanged reads ipt's generation, when ipt can tell it, before the
// tables are read (so a commit during the read shows next time). It
// reports true when the generation is the one a check that found nothing
// recorded; the caller may then skip its check. Otherwise call Done after
// the check.
func (g *Generation) Unchanged(ipt utiliptables.Interface, logger klog.Logger) bool {
	g.pendingOK = false
	gr, ok := ipt.(utiliptables.GenerationReader)
	if !ok {
		g.valid = false
		return false
	}
	gen, ok, err := gr.Generation()
	switch {
	case err != nil:
		logger.V(2).Info("Could not read the nf_tables generation; comparing the tables", "err", err)
	case ok && g.valid && gen == g.gen:
		return true
	case ok:
		g.pending, g.pendingOK = gen, true
	}
	g.valid = false
	return false
}

// Done records the check's outcome: clean means it found nothing to report,
// so the generation read by Unchanged may spare the next check.
func (g *Generation) Done(clean bool) {
	g.valid = clean && g.pendingOK
	if g.valid {
		g.gen = g.pending
	}
}
