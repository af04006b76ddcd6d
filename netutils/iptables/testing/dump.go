package testing

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/net-utils/iptables"
)

// IPTablesDump is parsed iptables-save output or iptables-restore input.
type IPTablesDump struct {
	Tables []Table
}

// Table is one table of an IPTablesDump.
type Table struct {
	Name   iptables.Table
	Chains []Chain
}

// Chain is one chain of a Table.
type Chain struct {
	Name    iptables.Chain
	Packets uint64
	Bytes   uint64
	Rules   []*Rule

	// Deleted is set when the input deleted the chain with "-X NAME" (which
	// iptables-restore input has and iptables-save output never does).
	Deleted bool

	// Policy is a built-in chain's policy ("ACCEPT", "DROP"); empty for a user chain,
	// whose declaration says "-".
	Policy string
}

// lineError is an error tied to a line of input. It satisfies iptables.ParseError, so
// callers handle the fake's Restore failures the way they handle iptables-restore's.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Line() int     { return e.line }
func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

var _ iptables.ParseError = (*lineError)(nil)

func errorf(line int, format string, args ...any) error {
	return &lineError{line: line, msg: fmt.Sprintf(format, args...)}
}

// ParseIPTablesDump parses iptables-save output or iptables-restore input: "*table"
// headers, ":CHAIN POLICY [packets:bytes]" declarations, "-A", "-I", "-D", "-F", "-X",
// "-N", "-P" and "-Z" commands, "COMMIT", blank lines and "#" comments. Commands are
// applied in order within the dump (a chain redeclared is emptied again, "-F" empties
// one, "-X" marks it Deleted), and they may only name chains declared in the dump,
// since it has no other state. Errors carry the 1-based line number (as an
// iptables.ParseError).
func ParseIPTablesDump(data string) (*IPTablesDump, error) {
	dump := &IPTablesDump{}
	a := newApplier(dump, modeDump, false, false)
	if err := a.apply(data, ""); err != nil {
		return nil, err
	}
	return dump, nil
}

// String renders the dump in iptables-restore format: per table, the chain
// declarations, then the rules, then "-X" for deleted chains, then COMMIT.
func (dump *IPTablesDump) String() string {
	var b strings.Builder
	for i := range dump.Tables {
		writeTable(&b, &dump.Tables[i], true)
	}
	return b.String()
}

func writeTable(b *strings.Builder, t *Table, withDeletes bool) {
	b.WriteString("*")
	b.WriteString(string(t.Name))
	b.WriteByte('\n')
	for i := range t.Chains {
		c := &t.Chains[i]
		policy := c.Policy
		if policy == "" {
			policy = "-"
		}
		b.WriteString(":")
		b.WriteString(string(c.Name))
		b.WriteString(" ")
		b.WriteString(policy)
		b.WriteString(" [")
		b.WriteString(strconv.FormatUint(c.Packets, 10))
		b.WriteString(":")
		b.WriteString(strconv.FormatUint(c.Bytes, 10))
		b.WriteString("]\n")
	}
	for i := range t.Chains {
		for _, r := range t.Chains[i].Rules {
			b.WriteString(r.Raw)
			b.WriteByte('\n')
		}
	}
	if withDeletes {
		for i := range t.Chains {
			if t.Chains[i].Deleted {
				b.WriteString("-X ")
				b.WriteString(string(t.Chains[i].Name))
				b.WriteByte('\n')
			}
		}
	}
	b.WriteString("COMMIT\n")
}

// GetTable returns the named table, or an error if the dump has none.
func (dump *IPTablesDump) GetTable(table iptables.Table) (*Table, error) {
	for i := range dump.Tables {
		if dump.Tables[i].Name == table {
			return &dump.Tables[i], nil
		}
	}
	return nil, fmt.Errorf("no such table %q", table)
}

// GetChain returns the named chain of the named table, or an error if there is none.
// The error text is what iptables prints, so iptables.IsNotFoundError recognizes it.
func (dump *IPTablesDump) GetChain(table iptables.Table, chain iptables.Chain) (*Chain, error) {
	t, err := dump.GetTable(table)
	if err != nil {
		return nil, err
	}
	if c := t.chain(chain); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("no such chain %q in table %q: No chain/target/match by that name", chain, table)
}

func (t *Table) chain(name iptables.Chain) *Chain {
	for i := range t.Chains {
		if t.Chains[i].Name == name {
			return &t.Chains[i]
		}
	}
	return nil
}

// clone copies the dump's structure. Rules are shared: nothing modifies a Rule once
// parsed.
func (dump *IPTablesDump) clone() *IPTablesDump {
	out := &IPTablesDump{Tables: make([]Table, len(dump.Tables))}
	for i, t := range dump.Tables {
		out.Tables[i] = t.clone()
	}
	return out
}

func (t Table) clone() Table {
	chains := make([]Chain, len(t.Chains))
	for j, c := range t.Chains {
		c.Rules = append([]*Rule(nil), c.Rules...)
		chains[j] = c
	}
	t.Chains = chains
	return t
}
