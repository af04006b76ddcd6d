package testing

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/net-utils/iptables"
)

// opKind is one kind of iptables-restore input line.
type opKind int

const (
	opTable       opKind = iota // *table
	opDeclare                   // :CHAIN POLICY [p:b]
	opAppend                    // -A CHAIN rule
	opInsert                    // -I CHAIN [pos] rule
	opDelete                    // -D CHAIN (pos | rule)
	opFlush                     // -F [CHAIN]
	opDeleteChain               // -X [CHAIN]
	opNewChain                  // -N CHAIN
	opPolicy                    // -P CHAIN POLICY
	opZero                      // -Z [CHAIN]
	opCommit                    // COMMIT
)

// op is one parsed input line.
type op struct {
	kind  opKind
	line  int
	table iptables.Table // opTable
	chain iptables.Chain // empty for "-F", "-X", "-Z" without a chain

	policy         string // opDeclare, opPolicy; "-" for none
	packets, bytes uint64 // opDeclare
	hasCounters    bool   // opDeclare had "[p:b]"
	rule           *Rule  // opAppend, opInsert
	pos            int    // opInsert, opDelete by number (1-based); 0 if none
	// opDelete by rule: the rule's words after the chain name.
	deleteArgs      []string
	deleteArgsGiven bool
}

// commandAliases maps long command spellings to the short ones.
var commandAliases = map[string]string{
	"--append": "-A", "--insert": "-I", "--delete": "-D", "--flush": "-F",
	"--delete-chain": "-X", "--new-chain": "-N", "--policy": "-P", "--zero": "-Z",
}

// parseOps turns iptables-restore input into ops, handing each to emit as soon as it
// is parsed (so that a large input is never held as a list of ops). It checks syntax
// only: what the commands do to chains is emit's business. It stops at the first
// error, from the input or from emit.
func parseOps(data string, emit func(*op) error) error {
	inTable := false
	tables := 0
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		line := data
		if i := strings.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = ""
		}
		line = strings.TrimFunc(line, isBlankRune)
		if line == "" || line[0] == '#' {
			continue
		}
		if !inTable {
			tables++
			if line[0] != '*' || len(line) == 1 || strings.ContainsAny(line, " \t") {
				return errorf(lineNo, "could not parse iptables data: table %d starts with %q, not a table name (\"*table\")", tables, line)
			}
			if err := emit(&op{kind: opTable, line: lineNo, table: iptables.Table(line[1:])}); err != nil {
				return err
			}
			inTable = true
			continue
		}
		var o op
		var err error
		switch {
		case line == "COMMIT":
			o = op{kind: opCommit, line: lineNo}
			inTable = false
		case line[0] == '*':
			return errorf(lineNo, "table %q starts before the previous table's COMMIT line", line[1:])
		case line[0] == ':':
			o, err = parseDeclaration(lineNo, line)
		case line[0] == '-':
			o, err = parseCommand(lineNo, line)
		default:
			err = errorf(lineNo, "cannot parse %q", line)
		}
		if err == nil {
			err = emit(&o)
		}
		if err != nil {
			return err
		}
	}
	if inTable {
		return errorf(lineNo, "could not parse iptables data: no COMMIT line? (table %d is not committed)", tables)
	}
	return nil
}

// parseDeclaration parses ":CHAIN POLICY [packets:bytes]"; the counters are optional.
func parseDeclaration(lineNo int, line string) (op, error) {
	fields := strings.FieldsFunc(line[1:], isBlankRune)
	if len(fields) < 2 || len(fields) > 3 || fields[0] == "" {
		return op{}, errorf(lineNo, "bad chain declaration %q (want \":CHAIN POLICY [packets:bytes]\")", line)
	}
	o := op{kind: opDeclare, line: lineNo, chain: iptables.Chain(fields[0]), policy: fields[1]}
	if len(fields) == 3 {
		c := fields[2]
		p, b, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(c, "["), "]"), ":")
		if !ok || !strings.HasPrefix(c, "[") || !strings.HasSuffix(c, "]") {
			return op{}, errorf(lineNo, "bad counters %q in chain declaration %q", c, line)
		}
		var err1, err2 error
		o.packets, err1 = strconv.ParseUint(p, 10, 64)
		o.bytes, err2 = strconv.ParseUint(b, 10, 64)
		if err1 != nil || err2 != nil {
			return op{}, errorf(lineNo, "bad counters %q in chain declaration %q", c, line)
		}
		o.hasCounters = true
	}
	return o, nil
}

func parseCommand(lineNo int, line string) (op, error) {
	words, err := splitWords(line)
	if err != nil {
		return op{}, errorf(lineNo, "bad line %q: %v", line, err)
	}
	cmd := words[0]
	if long, ok := commandAliases[cmd]; ok {
		cmd = long
	}
	args := words[1:]
	o := op{line: lineNo}
	if len(args) > 0 {
		o.chain = iptables.Chain(args[0])
	}
	switch cmd {
	case "-A":
		r, err := parseRuleWords(line, words, false)
		if err != nil {
			return op{}, errorf(lineNo, "%v", err)
		}
		o.kind, o.rule = opAppend, r
	case "-I":
		if len(args) < 2 {
			return op{}, errorf(lineNo, "bad insert %q (want \"-I CHAIN [POSITION] RULE\")", line)
		}
		rest := args[1:]
		if n, err := strconv.Atoi(rest[0]); err == nil {
			if n < 1 {
				return op{}, errorf(lineNo, "bad rule position %q in %q", rest[0], line)
			}
			o.pos, rest = n, rest[1:]
		} else {
			o.pos = 1
		}
		// Store it as the "-A" rule iptables-save would print once inserted.
		words := append([]string{"-A", args[0]}, rest...)
		r, err := parseRuleWords("-A "+args[0]+" "+joinWords(rest), words, false)
		if err != nil {
			return op{}, errorf(lineNo, "%v", err)
		}
		o.kind, o.rule = opInsert, r
	case "-D":
		if len(args) < 2 {
			return op{}, errorf(lineNo, "bad delete %q (want \"-D CHAIN RULE\" or \"-D CHAIN NUMBER\")", line)
		}
		o.kind = opDelete
		if n, err := strconv.Atoi(args[1]); err == nil && len(args) == 2 {
			if n < 1 {
				return op{}, errorf(lineNo, "bad rule number %q in %q", args[1], line)
			}
			o.pos = n
		} else {
			o.deleteArgs, o.deleteArgsGiven = args[1:], true
		}
	case "-F", "-X", "-Z":
		if len(args) > 1 {
			return op{}, errorf(lineNo, "unexpected arguments in %q", line)
		}
		o.kind = map[string]opKind{"-F": opFlush, "-X": opDeleteChain, "-Z": opZero}[cmd]
	case "-N":
		if len(args) != 1 {
			return op{}, errorf(lineNo, "bad new-chain command %q (want \"-N CHAIN\")", line)
		}
		o.kind = opNewChain
	case "-P":
		if len(args) != 2 {
			return op{}, errorf(lineNo, "bad policy command %q (want \"-P CHAIN POLICY\")", line)
		}
		o.kind, o.policy = opPolicy, args[1]
	default:
		return op{}, errorf(lineNo, "cannot parse %q: unknown command %q", line, words[0])
	}
	return o, nil
}

// builtinChains are the chains the kernel creates in each table, in iptables-save
// order.
var builtinChains = map[iptables.Table][]iptables.Chain{
	iptables.TableNAT:    {iptables.ChainPrerouting, iptables.ChainInput, iptables.ChainOutput, iptables.ChainPostrouting},
	iptables.TableFilter: {iptables.ChainInput, iptables.ChainForward, iptables.ChainOutput},
	iptables.TableMangle: {iptables.ChainPrerouting, iptables.ChainInput, iptables.ChainForward, iptables.ChainOutput, iptables.ChainPostrouting},
	"raw":                {iptables.ChainPrerouting, iptables.ChainOutput},
	"security":           {iptables.ChainInput, iptables.ChainForward, iptables.ChainOutput},
}

func isBuiltinChain(table iptables.Table, chain iptables.Chain) bool {
	return slices.Contains(builtinChains[table], chain)
}

// targets are the standard and extension targets a rule may jump to without a chain
// of that name existing.
var targets = sets.New(
	"ACCEPT", "DROP", "RETURN", "QUEUE", "REJECT", "DNAT", "SNAT", "MASQUERADE",
	"REDIRECT", "NETMAP", "MARK", "CONNMARK", "LOG", "NFLOG", "NFQUEUE", "NOTRACK", "CT",
	"TRACE", "TCPMSS", "TPROXY", "CLASSIFY", "DSCP", "TOS", "TTL", "HL", "AUDIT",
	"CHECKSUM", "CONNSECMARK", "SECMARK", "IDLETIMER", "LED", "RATEEST", "SET", "SYNPROXY",
	"TEE", "ECN", "CLUSTERIP", "ULOG",
)

// applyMode selects what apply models.
type applyMode int

const (
	// modeDump builds an IPTablesDump of the input itself: chains exist only if
	// declared in the input, "-X" marks a chain Deleted, jumps are not checked.
	modeDump applyMode = iota
	// modeRestore applies input to existing tables as iptables-restore does.
	modeRestore
)

// applier applies ops to a dump.
type applier struct {
	dump     *IPTablesDump
	mode     applyMode
	flush    bool
	counters bool

	// State of the table being applied.
	table *Table
	index map[iptables.Chain]int // chain name -> index in table.Chains
	dead  map[int]bool           // indexes of chains deleted in modeRestore
	// Lines, for error messages at COMMIT time: where each rule and deletion in this
	// input came from.
	ruleLines    map[*Rule]int
	deletedLines map[iptables.Chain]int
}

func newApplier(dump *IPTablesDump, mode applyMode, flush, counters bool) *applier {
	return &applier{dump: dump, mode: mode, flush: flush, counters: counters}
}

// apply parses data and applies it. When only is not empty, ops for other tables are
// skipped, as "iptables-restore -T only" does.
func (a *applier) apply(data string, only iptables.Table) error {
	skipping := false
	return parseOps(data, func(o *op) error {
		if o.kind == opTable {
			skipping = only != "" && o.table != only
		}
		if skipping {
			return nil
		}
		return a.applyOne(o)
	})
}

func (a *applier) applyOne(o *op) error {
	switch o.kind {
	case opTable:
		return a.startTable(o)
	case opCommit:
		return a.commit(o)
	case opDeclare:
		return a.declare(o)
	case opAppend, opInsert:
		c, err := a.liveChain(o.line, o.rule.Chain, "add rules to")
		if err != nil {
			return err
		}
		if o.kind == opAppend {
			c.Rules = append(c.Rules, o.rule)
		} else {
			if o.pos > len(c.Rules)+1 {
				return errorf(o.line, "cannot insert rule at position %d in chain %q, which has %d rules", o.pos, c.Name, len(c.Rules))
			}
			c.Rules = slices.Insert(c.Rules, o.pos-1, o.rule)
		}
		if a.mode == modeRestore {
			a.ruleLines[o.rule] = o.line
		}
	case opDelete:
		c, err := a.liveChain(o.line, o.chain, "delete rules from")
		if err != nil {
			return err
		}
		idx := -1
		if o.deleteArgsGiven {
			idx = slices.IndexFunc(c.Rules, func(r *Rule) bool { return slices.Equal(ruleArgs(r), o.deleteArgs) })
		} else if o.pos <= len(c.Rules) {
			idx = o.pos - 1
		}
		if idx < 0 {
			return errorf(o.line, "no matching rule to delete in chain %q (does a matching rule exist in that chain?)", c.Name)
		}
		c.Rules = slices.Delete(c.Rules, idx, idx+1)
	case opFlush, opZero:
		var chains []*Chain
		if o.chain == "" {
			chains = a.allLiveChains()
		} else {
			c, err := a.liveChain(o.line, o.chain, "flush")
			if err != nil {
				return err
			}
			chains = []*Chain{c}
		}
		for _, c := range chains {
			if o.kind == opFlush {
				c.Rules = nil
			} else {
				c.Packets, c.Bytes = 0, 0
			}
		}
	case opDeleteChain:
		if o.chain != "" {
			return a.deleteChain(o.line, o.chain)
		}
		for _, c := range a.allLiveChains() {
			if !isBuiltinChain(a.table.Name, c.Name) {
				if err := a.deleteChain(o.line, c.Name); err != nil {
					return err
				}
			}
		}
	case opNewChain:
		if a.lookup(o.chain) != nil {
			return errorf(o.line, "chain %q already exists", o.chain)
		}
		a.addChain(Chain{Name: o.chain})
	case opPolicy:
		c, err := a.liveChain(o.line, o.chain, "set the policy of")
		if err != nil {
			return err
		}
		if a.mode == modeRestore && !isBuiltinChain(a.table.Name, c.Name) {
			return errorf(o.line, "cannot set policy %q on user-defined chain %q", o.policy, c.Name)
		}
		c.Policy = o.policy
	}
	return nil
}

func (a *applier) startTable(o *op) error {
	t, err := a.dump.GetTable(o.table)
	if err != nil {
		if a.mode == modeRestore {
			return errorf(o.line, "table %q does not exist", o.table)
		}
		a.dump.Tables = append(a.dump.Tables, Table{Name: o.table})
		t = &a.dump.Tables[len(a.dump.Tables)-1]
	}
	a.table = t
	a.index = make(map[iptables.Chain]int, len(t.Chains))
	for i := range t.Chains {
		a.index[t.Chains[i].Name] = i
	}
	a.dead = map[int]bool{}
	a.ruleLines = map[*Rule]int{}
	a.deletedLines = map[iptables.Chain]int{}
	if a.mode == modeRestore && a.flush {
		// Without --noflush the table is replaced: user chains go, built-in chains
		// are emptied but keep their policies.
		for i := range t.Chains {
			if isBuiltinChain(t.Name, t.Chains[i].Name) {
				t.Chains[i].Rules = nil
			} else {
				a.dead[i] = true
				delete(a.index, t.Chains[i].Name)
			}
		}
	}
	return nil
}

// lookup returns the named chain of the current table if it exists (in modeDump: was
// declared, deleted or not).
func (a *applier) lookup(name iptables.Chain) *Chain {
	i, ok := a.index[name]
	if !ok {
		return nil
	}
	return &a.table.Chains[i]
}

// liveChain returns a chain that may be modified, or an error naming what the line
// tried to do.
func (a *applier) liveChain(line int, name iptables.Chain, doing string) (*Chain, error) {
	c := a.lookup(name)
	if c == nil {
		return nil, errorf(line, "cannot %s chain %q: no such chain %q", doing, name, name)
	}
	if c.Deleted {
		return nil, errorf(line, "cannot %s deleted chain %q", doing, name)
	}
	return c, nil
}

func (a *applier) allLiveChains() []*Chain {
	var out []*Chain
	for i := range a.table.Chains {
		if !a.dead[i] && !a.table.Chains[i].Deleted {
			out = append(out, &a.table.Chains[i])
		}
	}
	return out
}

func (a *applier) addChain(c Chain) *Chain {
	a.table.Chains = append(a.table.Chains, c)
	a.index[c.Name] = len(a.table.Chains) - 1
	return &a.table.Chains[len(a.table.Chains)-1]
}

func (a *applier) declare(o *op) error {
	builtin := isBuiltinChain(a.table.Name, o.chain)
	if a.mode == modeRestore && !builtin && o.policy != "-" {
		return errorf(o.line, "cannot set policy %q on user-defined chain %q", o.policy, o.chain)
	}
	c := a.lookup(o.chain)
	if c == nil {
		c = a.addChain(Chain{Name: o.chain})
	} else if a.mode == modeDump || !builtin {
		// Declaring an existing user chain empties it; in a dump, a redeclared
		// chain starts over too.
		c.Rules = nil
		c.Deleted = false
	}
	if o.policy != "-" {
		c.Policy = o.policy
	}
	if o.hasCounters && (a.mode == modeDump || a.counters) {
		c.Packets, c.Bytes = o.packets, o.bytes
	}
	return nil
}

func (a *applier) deleteChain(line int, name iptables.Chain) error {
	c := a.lookup(name)
	if c == nil || c.Deleted {
		return errorf(line, "cannot delete chain %q: no such chain %q (No chain/target/match by that name)", name, name)
	}
	if a.mode == modeRestore && isBuiltinChain(a.table.Name, name) {
		return errorf(line, "cannot delete built-in chain %q", name)
	}
	if len(c.Rules) != 0 {
		return errorf(line, "cannot delete chain %q after adding rules (it has %d)", name, len(c.Rules))
	}
	if a.mode == modeDump {
		c.Deleted = true
		return nil
	}
	// References are checked at COMMIT, once, instead of scanning every rule for
	// every deletion.
	i := a.index[name]
	a.dead[i] = true
	delete(a.index, name)
	a.deletedLines[name] = line
	return nil
}

// commit finishes the current table: in modeRestore it drops deleted chains and
// checks that every jump still lands somewhere.
func (a *applier) commit(o *op) error {
	if a.mode == modeRestore {
		if len(a.dead) > 0 {
			kept := make([]Chain, 0, len(a.table.Chains)-len(a.dead))
			for i := range a.table.Chains {
				if !a.dead[i] {
					kept = append(kept, a.table.Chains[i])
				}
			}
			a.table.Chains = kept
		}
		if err := checkJumps(a.table, a.ruleLines, a.deletedLines, o.line); err != nil {
			return err
		}
	}
	a.table, a.index, a.dead, a.ruleLines, a.deletedLines = nil, nil, nil, nil, nil
	return nil
}

// checkJumps verifies that every -j/-g target in t is a target or an existing chain.
// The error names the input line responsible when there is one: the rule's, or the
// "-X" that deleted a chain still referenced, else commitLine.
func checkJumps(t *Table, ruleLines map[*Rule]int, deletedLines map[iptables.Chain]int, commitLine int) error {
	chains := make(map[iptables.Chain]bool, len(t.Chains))
	for i := range t.Chains {
		chains[t.Chains[i].Name] = true
	}
	for i := range t.Chains {
		for _, r := range t.Chains[i].Rules {
			for _, target := range []*IPTablesValue{r.Jump, r.Goto} {
				if target == nil || targets.Has(target.Value) || chains[iptables.Chain(target.Value)] {
					continue
				}
				if line, ok := deletedLines[iptables.Chain(target.Value)]; ok {
					return errorf(line, "cannot delete chain %q: referenced by existing rules (%q)", target.Value, r.Raw)
				}
				line := commitLine
				if l, ok := ruleLines[r]; ok {
					line = l
				}
				return errorf(line, "rule %q jumps to a non-existent chain %q (Chain '%s' does not exist)", r.Raw, target.Value, target.Value)
			}
		}
	}
	return nil
}

// String names an op kind for debugging.
func (k opKind) String() string {
	names := [...]string{"table", "declare", "append", "insert", "delete", "flush", "delete-chain", "new-chain", "policy", "zero", "commit"}
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("opKind(%d)", int(k))
}
