package testing

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/net-utils/iptables"
)

// maxRestoreHistory bounds RestoreHistory, so that benchmarks restoring megabytes per
// iteration do not grow without limit.
const maxRestoreHistory = 32

// FakeIPTables is an in-memory iptables.Interface. Its state is Dump, which tests may
// read (and, when nothing else is using the fake, modify) directly. Methods behave like
// the real iptables: missing chains and tables are errors (worded so that
// iptables.IsNotFoundError recognizes them), deleting a chain that is non-empty or
// still referenced fails, rules may only jump to existing chains, and Restore follows
// iptables-restore's flush/--noflush semantics. Unlike iptables-restore, which commits
// table by table, a failed Restore or RestoreAll changes nothing at all.
//
// Restore and RestoreAll replace Dump.Tables with a new slice, so look tables and chains
// up again (GetTable, GetChain) after calling them rather than keeping pointers.
//
// Methods are safe for concurrent use. Monitor does nothing, as upstream's fake.
type FakeIPTables struct {
	mu       sync.Mutex
	protocol iptables.Protocol

	// Dump holds the tables: nat, filter and mangle, with their built-in chains.
	Dump *IPTablesDump

	// Lines is the input of the most recent Restore or RestoreAll call, whether it
	// succeeded or not (upstream's older fake had this field too).
	Lines []byte

	history      []RestoreCall
	restoreCalls int
	restoreBytes int64
	restoreErr   error
	presentErr   error
	features     iptables.Features
}

// RestoreCall records one Restore or RestoreAll call on a FakeIPTables.
type RestoreCall struct {
	// Table is the table passed to Restore, or "" for RestoreAll.
	Table    iptables.Table
	Data     []byte
	Flush    iptables.FlushFlag
	Counters iptables.RestoreCountersFlag
	// Err is what the call returned.
	Err error
}

// NewFake returns an IPv4 FakeIPTables with empty nat, filter and mangle tables.
func NewFake() *FakeIPTables {
	f := &FakeIPTables{
		protocol: iptables.ProtocolIPv4,
		Dump:     &IPTablesDump{},
		features: iptables.Features{
			Version:     utilversion.MustParseGeneric("1.8.9"),
			Variant:     iptables.VariantNFT,
			Wait:        true,
			WaitSeconds: true,
			RestoreWait: true,
			RandomFully: true,
		},
	}
	for _, name := range []iptables.Table{iptables.TableNAT, iptables.TableFilter, iptables.TableMangle} {
		t := Table{Name: name}
		for _, c := range builtinChains[name] {
			t.Chains = append(t.Chains, Chain{Name: c, Policy: "ACCEPT"})
		}
		f.Dump.Tables = append(f.Dump.Tables, t)
	}
	return f
}

// NewIPv6Fake returns a FakeIPTables like NewFake's whose IsIPv6 is true.
func NewIPv6Fake() *FakeIPTables {
	f := NewFake()
	f.protocol = iptables.ProtocolIPv6
	return f
}

// IsIPv6 is part of iptables.Interface.
func (f *FakeIPTables) IsIPv6() bool { return f.protocol == iptables.ProtocolIPv6 }

// Protocol is part of iptables.Interface.
func (f *FakeIPTables) Protocol() iptables.Protocol { return f.protocol }

// Features implements iptables.FeatureDetector; see SetFeatures.
func (f *FakeIPTables) Features() iptables.Features {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.features
}

// SetFeatures sets what Features reports (by default iptables 1.8.9, nf_tables, with
// every feature).
func (f *FakeIPTables) SetFeatures(features iptables.Features) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.features = features
}

// Present is part of iptables.Interface; see SetPresentError.
func (f *FakeIPTables) Present() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.presentErr
}

// SetPresentError makes Present return err (nil: iptables is present).
func (f *FakeIPTables) SetPresentError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.presentErr = err
}

// Monitor is part of iptables.Interface. The fake returns at once: nothing outside the
// test flushes its tables.
func (f *FakeIPTables) Monitor(canary iptables.Chain, tables []iptables.Table, reloadFunc func(), interval time.Duration, stopCh <-chan struct{}) {
}

// EnsureChain is part of iptables.Interface.
func (f *FakeIPTables) EnsureChain(table iptables.Table, chain iptables.Chain) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.Dump.GetTable(table)
	if err != nil {
		return false, err
	}
	if t.chain(chain) != nil {
		return true, nil
	}
	t.Chains = append(t.Chains, Chain{Name: chain})
	return false, nil
}

// FlushChain is part of iptables.Interface.
func (f *FakeIPTables) FlushChain(table iptables.Table, chain iptables.Chain) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.Dump.GetChain(table, chain)
	if err != nil {
		return err
	}
	c.Rules = nil
	return nil
}

// DeleteChain is part of iptables.Interface.
func (f *FakeIPTables) DeleteChain(table iptables.Table, chain iptables.Chain) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.Dump.GetChain(table, chain)
	if err != nil {
		return err
	}
	if isBuiltinChain(table, chain) {
		return fmt.Errorf("cannot delete built-in chain %q in table %q", chain, table)
	}
	t, _ := f.Dump.GetTable(table)
	for i := range t.Chains {
		for _, r := range t.Chains[i].Rules {
			if jumpsTo(r, chain) {
				return fmt.Errorf("cannot delete chain %q in table %q: referenced by existing rules (%q) (Too many links)", chain, table, r.Raw)
			}
		}
	}
	if len(c.Rules) != 0 {
		return fmt.Errorf("cannot delete chain %q in table %q: it has %d rules (Directory not empty)", chain, table, len(c.Rules))
	}
	t.Chains = slices.DeleteFunc(t.Chains, func(c Chain) bool { return c.Name == chain })
	return nil
}

func jumpsTo(r *Rule, chain iptables.Chain) bool {
	return (r.Jump != nil && r.Jump.Value == string(chain)) || (r.Goto != nil && r.Goto.Value == string(chain))
}

// ChainExists is part of iptables.Interface. Like the real one (and unlike upstream's
// fake), a missing chain is (false, error).
func (f *FakeIPTables) ChainExists(table iptables.Table, chain iptables.Chain) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.Dump.GetChain(table, chain); err != nil {
		return false, err
	}
	return true, nil
}

// fakeRule builds the Rule that "iptables -A chain args..." would add.
func fakeRule(chain iptables.Chain, args []string) (*Rule, error) {
	words := append([]string{"-A", string(chain)}, args...)
	return parseRuleWords("-A "+string(chain)+" "+joinWords(args), words, false)
}

// EnsureRule is part of iptables.Interface. Rules are compared word by word, so
// different quoting of the same rule matches.
func (f *FakeIPTables) EnsureRule(position iptables.RulePosition, table iptables.Table, chain iptables.Chain, args ...string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.Dump.GetChain(table, chain)
	if err != nil {
		return false, err
	}
	if slices.ContainsFunc(c.Rules, func(r *Rule) bool { return slices.Equal(ruleArgs(r), args) }) {
		return true, nil
	}
	rule, err := fakeRule(chain, args)
	if err != nil {
		return false, err
	}
	t, _ := f.Dump.GetTable(table)
	for _, target := range []*IPTablesValue{rule.Jump, rule.Goto} {
		if target != nil && !targets.Has(target.Value) && t.chain(iptables.Chain(target.Value)) == nil {
			return false, fmt.Errorf("rule %q jumps to a non-existent chain: Chain '%s' does not exist", rule.Raw, target.Value)
		}
	}
	switch position {
	case iptables.Append:
		c.Rules = append(c.Rules, rule)
	case iptables.Prepend:
		c.Rules = slices.Insert(c.Rules, 0, rule)
	default:
		return false, fmt.Errorf("bad rule position %q", position)
	}
	return false, nil
}

// DeleteRule is part of iptables.Interface.
func (f *FakeIPTables) DeleteRule(table iptables.Table, chain iptables.Chain, args ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.Dump.GetChain(table, chain)
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(c.Rules, func(r *Rule) bool { return slices.Equal(ruleArgs(r), args) }); i >= 0 {
		c.Rules = slices.Delete(c.Rules, i, i+1)
	}
	return nil
}

// SaveInto is part of iptables.Interface. As upstream's fake, table "" saves every
// table.
func (f *FakeIPTables) SaveInto(table iptables.Table, buffer *bytes.Buffer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	if table == "" {
		for i := range f.Dump.Tables {
			writeTable(&b, &f.Dump.Tables[i], false)
		}
	} else {
		t, err := f.Dump.GetTable(table)
		if err != nil {
			return err
		}
		writeTable(&b, t, false)
	}
	buffer.WriteString(b.String())
	return nil
}

// Restore is part of iptables.Interface. Only the named table's part of data is
// applied, as with "iptables-restore -T table".
func (f *FakeIPTables) Restore(table iptables.Table, data []byte, flush iptables.FlushFlag, counters iptables.RestoreCountersFlag) error {
	return f.restore(table, data, flush, counters)
}

// RestoreAll is part of iptables.Interface.
func (f *FakeIPTables) RestoreAll(data []byte, flush iptables.FlushFlag, counters iptables.RestoreCountersFlag) error {
	return f.restore("", data, flush, counters)
}

func (f *FakeIPTables) restore(table iptables.Table, data []byte, flush iptables.FlushFlag, counters iptables.RestoreCountersFlag) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Callers reuse their buffers, so keep a copy.
	input := bytes.Clone(data)
	if input == nil {
		input = []byte{}
	}
	err := f.restoreErr
	if err == nil {
		err = f.applyRestore(table, string(input), flush, counters)
	}
	f.Lines = input
	f.restoreCalls++
	f.restoreBytes += int64(len(input))
	f.history = append(f.history, RestoreCall{Table: table, Data: input, Flush: flush, Counters: counters, Err: err})
	if len(f.history) > maxRestoreHistory {
		f.history = slices.Delete(f.history, 0, len(f.history)-maxRestoreHistory)
	}
	return err
}

// applyRestore applies input to a copy of the tables and keeps the copy only if all
// of it applied.
func (f *FakeIPTables) applyRestore(table iptables.Table, input string, flush iptables.FlushFlag, counters iptables.RestoreCountersFlag) error {
	if table != "" {
		if _, err := f.Dump.GetTable(table); err != nil {
			return err
		}
	}
	work := f.Dump.clone()
	if err := newApplier(work, modeRestore, bool(flush), bool(counters)).apply(input, table); err != nil {
		return err
	}
	f.Dump.Tables = work.Tables
	return nil
}

// SetRestoreError makes every Restore and RestoreAll fail with err, changing nothing,
// until it is called with nil. The calls are still recorded.
func (f *FakeIPTables) SetRestoreError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restoreErr = err
}

// LastRestoreInput returns the input of the most recent Restore or RestoreAll call, nil
// if there was none.
func (f *FakeIPTables) LastRestoreInput() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Lines
}

// RestoreHistory returns the most recent Restore and RestoreAll calls (up to 32),
// oldest first.
func (f *FakeIPTables) RestoreHistory() []RestoreCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.history)
}

// RestoreStats returns how many Restore and RestoreAll calls there were and how many
// bytes of input they were given in total.
func (f *FakeIPTables) RestoreStats() (calls int, bytes int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restoreCalls, f.restoreBytes
}

// ResetRestoreHistory forgets recorded restore calls, Lines and the totals.
func (f *FakeIPTables) ResetRestoreHistory() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.history, f.Lines, f.restoreCalls, f.restoreBytes = nil, nil, 0, 0
}

var (
	_ iptables.Interface       = (*FakeIPTables)(nil)
	_ iptables.FeatureDetector = (*FakeIPTables)(nil)
)
