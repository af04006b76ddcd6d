package jumprules

import (
	"bytes"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"

	utiliptables "k8s.io/net-utils/iptables"
)

// TableState is what Ensure (and a drift check) needs to know of a saved
// table: which chains exist and the rules of its built-in chains.
type TableState struct {
	chains sets.Set[utiliptables.Chain]
	// rules of built-in chains, each split into words after "-A CHAIN"
	rules map[utiliptables.Chain][][]string
}

// ParseTableState reads one table's iptables-save output.
func ParseTableState(save []byte) *TableState {
	st := &TableState{chains: utiliptables.GetChainsFromTable(save)}
	for line := range bytes.SplitSeq(save, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("-A ")); ok {
			// Only rules of built-in chains are split into words: the nat
			// table of a large cluster has a million rules of ours.
			if BuiltinChain(firstWord(rest)) != "" {
				st.AddRule(line)
			}
		}
	}
	return st
}

// firstWord returns line's first word, separated by blanks.
func firstWord(line []byte) []byte {
	line = bytes.TrimLeft(line, " \t")
	if i := bytes.IndexAny(line, " \t"); i >= 0 {
		return line[:i]
	}
	return line
}

// Reset forgets the chains and rules, keeping the memory, for a caller
// that collects rules with AddRule.
func (st *TableState) Reset() {
	if st.rules == nil {
		st.rules = map[utiliptables.Chain][][]string{}
	}
	clear(st.rules)
	st.chains = nil
}

// AddRule records an iptables-save "-A" line if it is a rule of a built-in
// chain, for a caller that scans the save itself (a drift check). Chains
// are not recorded: HasChain only answers for a parsed state.
func (st *TableState) AddRule(line []byte) {
	words := SplitRuleWords(string(line))
	if len(words) < 2 || words[0] != "-A" {
		return
	}
	c := BuiltinChain([]byte(words[1]))
	if c == "" {
		return
	}
	if st.rules == nil {
		st.rules = map[utiliptables.Chain][][]string{}
	}
	st.rules[c] = append(st.rules[c], words[2:])
}

// HasChain reports whether the saved table declares chain.
func (st *TableState) HasChain(chain utiliptables.Chain) bool {
	return st.chains.Has(chain)
}

// HasJump reports whether j's source chain has a rule jumping to j's
// target with j's comment and (a non-negated) conntrack state match. Other
// matches of the present rule are not compared.
func (st *TableState) HasJump(j Jump) bool {
	for _, w := range st.rules[j.Src] {
		if wordAfter(w, "-j") != string(j.Dst) {
			continue
		}
		if j.Comment != "" && wordAfter(w, "--comment") != j.Comment {
			continue
		}
		if ct := wordAfter(j.ExtraArgs, "--ctstate"); ct != "" && (wordAfter(w, "--ctstate") != ct || slices.Contains(w, "!")) {
			continue
		}
		return true
	}
	return false
}

// MissingJumps returns, in order, those of jumps in table that st lacks
// (HasJump): what a drift check reports.
func (st *TableState) MissingJumps(table utiliptables.Table, jumps []Jump) []Jump {
	var out []Jump
	for _, j := range jumps {
		if j.Table == table && !st.HasJump(j) {
			out = append(out, j)
		}
	}
	return out
}

// BuiltinChain returns the built-in chain name names, or "".
func BuiltinChain(name []byte) utiliptables.Chain {
	if len(name) > len(utiliptables.ChainPostrouting) {
		return "" // without converting: our chains and others' are many
	}
	switch c := utiliptables.Chain(name); c {
	case utiliptables.ChainInput, utiliptables.ChainOutput, utiliptables.ChainForward, utiliptables.ChainPrerouting, utiliptables.ChainPostrouting:
		return c
	}
	return ""
}

func wordAfter(words []string, flag string) string {
	for i := 0; i+1 < len(words); i++ {
		if words[i] == flag {
			return words[i+1]
		}
	}
	return ""
}

// SplitRuleWords splits an iptables-save line into words, removing the
// double quotes around words that contain spaces (and the backslashes that
// escape a quote inside them).
func SplitRuleWords(line string) []string {
	var words []string
	var cur []byte
	inQuote, inWord := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '"':
			inQuote, inWord = !inQuote, true
		case c == '\\' && inQuote && i+1 < len(line):
			i++
			cur = append(cur, line[i])
		case (c == ' ' || c == '\t') && !inQuote:
			if inWord {
				words = append(words, string(cur))
				cur, inWord = cur[:0], false
			}
		default:
			cur, inWord = append(cur, c), true
		}
	}
	if inWord {
		words = append(words, string(cur))
	}
	return words
}
