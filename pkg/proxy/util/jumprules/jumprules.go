package jumprules

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	utiliptables "k8s.io/net-utils/iptables"
)

// Jump is a rule in a built-in chain (Src) that jumps to one of ours (Dst).
type Jump struct {
	Table utiliptables.Table
	Src   utiliptables.Chain
	Dst   utiliptables.Chain
	// Comment, if set, is written as "-m comment --comment", and a present
	// rule only counts if it carries the same comment: upstream's rules are
	// told apart from other software's jumps to the same chain by it.
	Comment string
	// ExtraArgs are matches written before the comment. Of them only a
	// conntrack state ("--ctstate") is compared with a present rule.
	ExtraArgs []string
}

// Args returns the rule's arguments after the chain name, as EnsureRule,
// DeleteRule and a restore's "-I" line take them.
func (j Jump) Args() []string {
	args := slices.Clone(j.ExtraArgs)
	if j.Comment != "" {
		args = append(args, "-m", "comment", "--comment", j.Comment)
	}
	return append(args, "-j", string(j.Dst))
}

// Name names j in drift reports and logs: "nat/PREROUTING -j KUBE-SERVICES".
func (j Jump) Name() string { return string(j.Table) + "/" + string(j.Src) + " -j " + string(j.Dst) }

// Rule is j as iptables-save prints it, "-A <Src> <Args>": what a drift report
// says was expected.
func (j Jump) Rule() string { return "-A " + string(j.Src) + " " + QuoteArgs(j.Args()) }

// Chain is one of our chains that must exist although no jump from a
// built-in chain leads to it.
type Chain struct {
	Table utiliptables.Table
	Chain utiliptables.Chain
}

// tables are the tables Ensure reads and writes, in that order.
var tables = [...]utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT}

// Ensure makes every chain and every jump exist: the chains of chains and
// the Dst chains of jumps are created when missing, and each missing jump
// is inserted at the top of its built-in chain, in list order, as
// EnsureRule(Prepend) would.
//
// The filter and nat tables are read first (two iptables-save runs), so a
// full sync of a node that has everything makes no further iptables call.
// What is missing goes in one iptables-restore. The restore creates chains
// with "-N", which fails if the chain appeared since the save (rather than
// flushing someone else's new chain); then, as when a save failed, each
// chain and jump is ensured on its own, and EnsureRule checks exactly. An
// ipt implementing OneByOne always gets the one-by-one calls for what is
// missing. A jump is never skipped unless a rule with the same target,
// comment and ctstate is present.
//
// onSave, if not nil, is handed each table's iptables-save output (filter,
// then nat) as it is read, so a caller that wants the table too need not
// save it again; the bytes are only valid during the call.
func Ensure(logger klog.Logger, ipt utiliptables.Interface, jumps []Jump, chains []Chain, onSave func(utiliptables.Table, []byte)) error {
	present := map[utiliptables.Table]*TableState{}
	var buf bytes.Buffer
	for _, table := range tables {
		buf.Reset()
		if err := ipt.SaveInto(table, &buf); err != nil {
			logger.V(2).Info("iptables-save failed, ensuring every chain and jump rule", "table", table, "err", err)
			present = nil
			break
		}
		if onSave != nil {
			onSave(table, buf.Bytes())
		}
		present[table] = ParseTableState(buf.Bytes())
	}
	missingChains, missingJumps := missing(present, jumps, chains)
	if len(missingChains) == 0 && len(missingJumps) == 0 {
		return nil
	}
	if one, ok := ipt.(OneByOne); ok && one.WantsEnsureCalls() {
		return ensureEach(ipt, missingChains, missingJumps)
	}
	if present == nil {
		return ensureEach(ipt, missingChains, missingJumps)
	}
	err := ipt.RestoreAll(RestoreInput(present, missingJumps, missingChains), utiliptables.NoFlushTables, utiliptables.NoRestoreCounters)
	if err == nil {
		return nil
	}
	logger.V(2).Info("Adding the missing chains and jump rules in one restore failed, ensuring them one by one", "err", err)
	return ensureEach(ipt, missingChains, missingJumps)
}

// missing returns the chains and jumps present lacks; with present nil
// (a save failed), all of them.
func missing(present map[utiliptables.Table]*TableState, jumps []Jump, chains []Chain) ([]Chain, []Jump) {
	var mc []Chain
	for _, c := range chains {
		if st := present[c.Table]; st == nil || !st.HasChain(c.Chain) {
			mc = append(mc, c)
		}
	}
	var mj []Jump
	for _, j := range jumps {
		if st := present[j.Table]; st == nil || !st.HasChain(j.Dst) || !st.HasJump(j) {
			mj = append(mj, j)
		}
	}
	return mc, mj
}

// OneByOne is implemented by an Interface that wants what is missing as
// EnsureChain and EnsureRule calls rather than as a restore: a dry run
// prints each call as a line of its own (the iptables proxier's "# ensure:"
// lines, which `kube-proxy trace` reads).
type OneByOne interface {
	WantsEnsureCalls() bool
}

// ensureEach ensures the chains, then each jump with one EnsureChain (of
// its target) and one EnsureRule, stopping at the first error.
func ensureEach(ipt utiliptables.Interface, chains []Chain, jumps []Jump) error {
	for _, c := range chains {
		if _, err := ipt.EnsureChain(c.Table, c.Chain); err != nil {
			return fmt.Errorf("ensuring chain %s/%s: %w", c.Table, c.Chain, err)
		}
	}
	for _, j := range jumps {
		if _, err := ipt.EnsureChain(j.Table, j.Dst); err != nil {
			return fmt.Errorf("ensuring chain %s/%s: %w", j.Table, j.Dst, err)
		}
		if _, err := ipt.EnsureRule(utiliptables.Prepend, j.Table, j.Src, j.Args()...); err != nil {
			return fmt.Errorf("ensuring jump %s/%s -> %s: %w", j.Table, j.Src, j.Dst, err)
		}
	}
	return nil
}

// RestoreInput is the iptables-restore input (for --noflush) that creates
// the chains the saved tables in present lack, first those of chains, then
// the targets of jumps, and inserts jumps at the top of their chains in list
// order, as EnsureRule(Prepend) would. chains and jumps are what present is
// missing (a chain present is not created again: "-N" of an existing chain
// fails the restore). A table with nothing to write is left out.
func RestoreInput(present map[utiliptables.Table]*TableState, jumps []Jump, chains []Chain) []byte {
	var b bytes.Buffer
	for _, table := range tables {
		created := sets.New[utiliptables.Chain]()
		wrote := false
		header := func() {
			if !wrote {
				fmt.Fprintf(&b, "*%s\n", table)
				wrote = true
			}
		}
		create := func(chain utiliptables.Chain) {
			if st := present[table]; (st == nil || !st.HasChain(chain)) && !created.Has(chain) {
				header()
				fmt.Fprintf(&b, "-N %s\n", chain)
				created.Insert(chain)
			}
		}
		for _, c := range chains {
			if c.Table == table {
				create(c.Chain)
			}
		}
		for _, j := range jumps {
			if j.Table != table {
				continue
			}
			header()
			create(j.Dst)
			fmt.Fprintf(&b, "-I %s %s\n", j.Src, QuoteArgs(j.Args()))
		}
		if wrote {
			b.WriteString("COMMIT\n")
		}
	}
	return b.Bytes()
}

// QuoteArgs joins args as iptables-restore (and a shell) reads them back,
// quoting words with spaces (rule comments).
func QuoteArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \t") {
			a = `"` + a + `"`
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
