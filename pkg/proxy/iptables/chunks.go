//go:build linux

package iptables

import (
	"bytes"
	"math"
	"slices"

	utiliptables "k8s.io/net-utils/iptables"
)

// Why large restores are split on iptables-nft.
//
// iptables-nft-restore (1.8.x) keeps, for each transaction (one table's
// block up to COMMIT), the names of every chain the block mentions in a
// sorted linked list, inserted into by a linear walk for each command: a
// chain line, and a rule's own chain and jump target. A block naming C
// chains with R rules therefore costs O((C+R)·C) string compares; at 2k
// Services (22k chains, 65k rules) perf puts 87% of the restore's time in
// that walk and the load takes ~8 minutes, at 10k it does not finish. The
// list is released on COMMIT, so the same rules written as several smaller
// nat blocks, fed to one iptables-restore, cost O(R·k) for blocks of k
// chains. Each COMMIT in turn makes the kernel validate the table's jump
// graph (nft_table_validate), O(table) per transaction, so blocks cannot be
// tiny either; nftBlockChains balances the two (see test/bench/README.md).
//
// legacy iptables-restore rewrites the whole table on every COMMIT, so
// there splitting would make the cost quadratic instead: only the
// nf_tables variant is split.
//
// What the kernel goes through is unchanged for packets: each service
// port's chains are flushed and refilled in one transaction (a block never
// splits a port: blocks are cut only where no rule before the cut names or
// jumps to a chain declared after it, and no later rule names or jumps to
// one declared before it), KUBE-MARK-MASQ, which port chains jump to, is
// ensured in a first block of its own, and the top-level chains (the
// dispatch into the ports) are written last with the filter table and the
// stale chains' deletion, as in an unsplit restore. Between blocks a packet
// meets, per port, either the old or the new rules of that port. If a block
// fails, iptables-restore stops there: the blocks before it stay applied
// (whole ports, not yet dispatched to if new), the sync fails as any failed
// restore does, and the full sync that follows rewrites everything.

// nftBlockChains returns how many service chains one nat block declares
// when a restore is split and the nat table holds tableChains service
// chains once it is applied. A block of k chains costs the list walk
// O(k) per command, so O(C·k) over a restore of C chains; each of its C/k
// COMMITs costs a validation of the whole table, O(tableChains). The sum
// is least for k proportional to √tableChains. The factor is measured on
// iptables 1.8.9 and kernel 6.18 (full syncs of test/bench's cluster, ours
// alone): at 1k Services (11k chains) blocks of 370 chains took 694–734 ms,
// of 500 733–805 ms and of 1000 779–960 ms; at 10k (110k chains) blocks of
// 700 took 13.0 s, of 1000 12.1 s and of 1400 11.9 s. The floor keeps
// small tables from being cut into blocks whose COMMITs cost more than the
// walk they save.
func nftBlockChains(tableChains int) int {
	return max(nftMinBlockChains, int(3.5*math.Sqrt(float64(tableChains))))
}

const nftMinBlockChains = 250

// chunking says whether and how the syncer splits nat restores.
type chunking struct {
	// decided is set once split has been chosen from the iptables variant;
	// tests set it, and split or maxChains, directly.
	decided bool
	// split is set on iptables-nft: blocks of nftBlockChains.
	split bool
	// maxChains, if set, is a fixed block size instead (tests).
	maxChains int

	// Scratch space reused between syncs.
	index  map[string]int32
	decls  []declLine
	rules  []ruleLine
	sufMin []int32
}

type declLine struct{ start, end int }

// ruleLine is one "-A" line of the ports' rules: its byte range, the
// declaration index of its chain (lo) and the highest declaration index it
// names (hi, its jump target's if that is declared later).
type ruleLine struct {
	start, end int
	lo, hi     int32
	min        int32 // lowest declaration index it names
}

// limit returns the block size for ipt's restores into a nat table of
// tableChains service chains, or 0 if they are not split; the variant is
// decided on first use.
func (c *chunking) limit(ipt utiliptables.Interface, tableChains int) int {
	if !c.decided {
		c.decided = true
		fd, ok := ipt.(utiliptables.FeatureDetector)
		c.split = ok && fd.Features().Variant == utiliptables.VariantNFT
	}
	switch {
	case c.maxChains > 0:
		return c.maxChains
	case c.split:
		return nftBlockChains(tableChains)
	}
	return 0
}

// restoreInput is tables.restoreInput, split into several nat blocks when
// the service ports' chains are more than max. It falls back to the
// unsplit input whenever the ports' lines do not parse as expected, so a
// surprise costs time, never correctness.
func (c *chunking) restoreInput(dst []byte, t *tables, filter, natTop bool, stale []utiliptables.Chain, max int) []byte {
	start := len(dst)
	if max <= 0 {
		return t.restoreInput(dst, filter, natTop, stale)
	}
	staleLen := 0
	for _, s := range stale {
		staleLen += len(":") + len(s) + len(" - [0:0]\n")
	}
	chains := t.natChains.b[t.natTopChains:]
	if staleLen > len(chains) {
		return t.restoreInput(dst, filter, natTop, stale)
	}
	portChains, staleChains := chains[:len(chains)-staleLen], chains[len(chains)-staleLen:]
	// Sync declares the stale chains after every port's, in this order.
	for rest, i := staleChains, 0; i < len(stale); i++ {
		n := len(stale[i]) + len(" - [0:0]\n")
		if rest[0] != ':' || string(rest[1:1+len(stale[i])]) != string(stale[i]) || string(rest[1+len(stale[i]):1+n]) != " - [0:0]\n" {
			return t.restoreInput(dst, filter, natTop, stale)
		}
		rest = rest[1+n:]
	}
	portRules := t.natRules.b[t.natTopRules:]
	if !c.parse(portChains, portRules) || len(c.decls) <= max {
		return t.restoreInput(dst, filter, natTop, stale)
	}
	cuts := c.plan(max)
	// The index of a large split is not worth keeping between full syncs,
	// which large clusters make rarely; the slices below stay valid.
	decls, rules := c.decls, c.rules
	c.index, c.decls, c.rules, c.sufMin = nil, nil, nil, nil
	if cuts == nil {
		return t.restoreInput(dst[:start], filter, natTop, stale)
	}
	// Each block adds its header and COMMIT, and the first block repeats
	// KUBE-MARK-MASQ's declaration and rules.
	dst = slices.Grow(dst, t.inputSize(stale)+(len(cuts)+2)*len("*nat\nCOMMIT\n")+t.natTopChains+t.natTopRules)

	if natTop {
		// Port chains jump to KUBE-MARK-MASQ, which must exist before
		// the first block; declaring it flushes it, so its rules come along.
		dst = append(dst, "*nat\n"...)
		dst = append(dst, ':')
		dst = append(dst, kubeMarkMasqChain...)
		dst = append(dst, " - [0:0]\n"...)
		prefix := "-A " + string(kubeMarkMasqChain) + " "
		for line := range bytes.Lines(t.natRules.b[:t.natTopRules]) {
			if bytes.HasPrefix(line, []byte(prefix)) {
				dst = append(dst, line...)
			}
		}
		dst = append(dst, "COMMIT\n"...)
	}
	declFrom, ruleFrom := 0, 0
	for _, cut := range cuts {
		dst = append(dst, "*nat\n"...)
		if cut.decl > declFrom {
			dst = append(dst, portChains[decls[declFrom].start:decls[cut.decl-1].end]...)
		}
		if cut.rule > ruleFrom {
			dst = append(dst, portRules[rules[ruleFrom].start:rules[cut.rule-1].end]...)
		}
		dst = append(dst, "COMMIT\n"...)
		declFrom, ruleFrom = cut.decl, cut.rule
	}

	if filter {
		dst = append(dst, "*filter\n"...)
		dst = append(dst, t.filterChains.b...)
		dst = append(dst, t.filterRules.b...)
		dst = append(dst, "COMMIT\n"...)
	}
	if natTop || len(stale) > 0 || len(t.edits.b) > 0 {
		dst = append(dst, "*nat\n"...)
		if natTop {
			dst = append(dst, t.natChains.b[:t.natTopChains]...)
		}
		dst = append(dst, staleChains...)
		if natTop {
			dst = append(dst, t.natRules.b[:t.natTopRules]...)
			dst = append(dst, t.dispatch.b...)
		} else {
			dst = append(dst, t.edits.b...)
		}
		for _, s := range stale {
			dst = append(dst, "-X "...)
			dst = append(dst, s...)
			dst = append(dst, '\n')
		}
		dst = append(dst, "COMMIT\n"...)
	}
	return dst
}

// parse indexes the ports' chain declarations and rules; false if a line
// is not what the generator writes.
func (c *chunking) parse(chains, rules []byte) bool {
	if c.index == nil {
		c.index = make(map[string]int32)
	}
	clear(c.index)
	c.decls, c.rules = c.decls[:0], c.rules[:0]
	c.decls = slices.Grow(c.decls, bytes.Count(chains, []byte{'\n'}))
	c.rules = slices.Grow(c.rules, bytes.Count(rules, []byte{'\n'}))
	for off := 0; off < len(chains); {
		end := bytes.IndexByte(chains[off:], '\n')
		if end < 0 || chains[off] != ':' {
			return false
		}
		end += off + 1
		sp := bytes.IndexByte(chains[off:end], ' ')
		if sp < 2 {
			return false
		}
		name := chains[off+1 : off+sp]
		if _, dup := c.index[string(name)]; dup {
			return false
		}
		c.index[string(name)] = int32(len(c.decls))
		c.decls = append(c.decls, declLine{off, end})
		off = end
	}
	for off := 0; off < len(rules); {
		end := bytes.IndexByte(rules[off:], '\n')
		if end < 0 {
			return false
		}
		end += off + 1
		line := rules[off:end]
		if !bytes.HasPrefix(line, []byte("-A ")) {
			return false
		}
		sp := bytes.IndexByte(line[3:], ' ')
		if sp < 0 {
			return false
		}
		lo, ok := c.index[string(line[3:3+sp])]
		if !ok {
			// A rule in a chain this restore does not declare: not a
			// port's, so the input is not what it should be.
			return false
		}
		r := ruleLine{start: off, end: end, lo: lo, hi: lo, min: lo}
		if target := jumpTarget(line); target != nil {
			if i, ok := c.index[string(target)]; ok {
				r.hi, r.min = max(r.hi, i), min(r.min, i)
			}
		}
		c.rules = append(c.rules, r)
		off = end
	}
	return true
}

// jumpTarget returns the word after "-j" outside double quotes, or nil.
func jumpTarget(line []byte) []byte {
	inQuote := false
	for i := 0; i+3 < len(line); i++ {
		switch {
		case line[i] == '"':
			inQuote = !inQuote
		case !inQuote && line[i] == ' ' && line[i+1] == '-' && line[i+2] == 'j' && line[i+3] == ' ':
			w := line[i+4:]
			if e := bytes.IndexAny(w, " \n"); e >= 0 {
				w = w[:e]
			}
			return w
		}
	}
	return nil
}

// cut ends a block before declaration decl and rule rule.
type cut struct{ decl, rule int }

// plan cuts the parsed lines into blocks of about max declarations. A cut
// before rule k is allowed only where every rule before it names chains
// declared before every chain a rule from k on names; it takes the
// declarations up to the first one a later rule names. It returns nil if
// no split is possible.
func (c *chunking) plan(maxChains int) []cut {
	n := len(c.rules)
	c.sufMin = slices.Grow(c.sufMin[:0], n+1)[:n+1]
	c.sufMin[n] = int32(len(c.decls))
	for k := n - 1; k >= 0; k-- {
		c.sufMin[k] = min(c.sufMin[k+1], c.rules[k].min)
	}
	var cuts []cut
	declFrom := 0
	prefMax := int32(-1)
	for k := 0; k < n; k++ {
		if k > 0 && prefMax < c.sufMin[k] && int(c.sufMin[k])-declFrom >= maxChains {
			cuts = append(cuts, cut{decl: int(c.sufMin[k]), rule: k})
			declFrom = int(c.sufMin[k])
		}
		prefMax = max(prefMax, c.rules[k].hi)
	}
	if len(cuts) == 0 {
		return nil
	}
	return append(cuts, cut{decl: len(c.decls), rule: n})
}
