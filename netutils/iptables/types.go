package iptables

import (
	"bytes"
	"time"
)

// Interface runs iptables operations for one IP family. Implementations are safe for
// concurrent use.
type Interface interface {
	// EnsureChain creates chain in table unless it exists. It reports whether the
	// chain already existed.
	EnsureChain(table Table, chain Chain) (bool, error)
	// FlushChain removes every rule from chain. A missing chain is an error.
	FlushChain(table Table, chain Chain) error
	// DeleteChain deletes chain, which must be empty and unreferenced. A missing chain
	// is an error.
	DeleteChain(table Table, chain Chain) error
	// ChainExists reports whether chain exists. Like upstream, a missing chain is
	// reported as (false, error), so callers may test either value.
	ChainExists(table Table, chain Chain) (bool, error)
	// EnsureRule adds the rule made of args to chain at position unless an identical
	// rule is already there. It reports whether the rule already existed.
	EnsureRule(position RulePosition, table Table, chain Chain, args ...string) (bool, error)
	// DeleteRule removes the rule made of args from chain if it is there; a rule that
	// is absent is not an error.
	DeleteRule(table Table, chain Chain, args ...string) error
	// IsIPv6 reports whether this instance manages ip6tables.
	IsIPv6() bool
	// Protocol returns the IP family this instance manages.
	Protocol() Protocol
	// SaveInto appends the iptables-save output for table to buffer.
	SaveInto(table Table, buffer *bytes.Buffer) error
	// Restore feeds data, in iptables-save format, to iptables-restore for table only.
	// flush selects whether the table is replaced (FlushTables) or patched
	// (NoFlushTables, "--noflush"); counters selects "--counters".
	Restore(table Table, data []byte, flush FlushFlag, counters RestoreCountersFlag) error
	// RestoreAll is Restore for every table named in data.
	RestoreAll(data []byte, flush FlushFlag, counters RestoreCountersFlag) error
	// Monitor notices when something outside this process (a firewall reload, an
	// "iptables -F") flushes tables or deletes chains, by creating the chain canary
	// with one rule in it in each of tables and checking every interval that each
	// rule is still there. Once one is gone it waits briefly for a flush in progress
	// to reach the other tables, calls reloadFunc, recreates the canaries and carries
	// on. It returns, deleting the canaries, when stopCh is closed. Call it in its own
	// goroutine.
	Monitor(canary Chain, tables []Table, reloadFunc func(), interval time.Duration, stopCh <-chan struct{})
	// Present reports, as a nil error, whether this IP family's iptables works on this
	// host (the binary runs and the kernel has the nat table).
	Present() error
}

// Protocol is the IP family an Interface manages.
type Protocol string

const (
	// ProtocolIPv4 selects iptables.
	ProtocolIPv4 Protocol = "IPv4"
	// ProtocolIPv6 selects ip6tables.
	ProtocolIPv6 Protocol = "IPv6"
)

// Table is the name of an iptables table.
type Table string

const (
	// TableNAT is the built-in nat table.
	TableNAT Table = "nat"
	// TableFilter is the built-in filter table.
	TableFilter Table = "filter"
	// TableMangle is the built-in mangle table.
	TableMangle Table = "mangle"
)

// Chain is the name of an iptables chain.
type Chain string

const (
	// ChainPostrouting is the built-in POSTROUTING chain (nat, mangle).
	ChainPostrouting Chain = "POSTROUTING"
	// ChainPrerouting is the built-in PREROUTING chain (nat, mangle).
	ChainPrerouting Chain = "PREROUTING"
	// ChainOutput is the built-in OUTPUT chain, for locally generated packets.
	ChainOutput Chain = "OUTPUT"
	// ChainInput is the built-in INPUT chain, for packets delivered locally.
	ChainInput Chain = "INPUT"
	// ChainForward is the built-in FORWARD chain, for routed packets.
	ChainForward Chain = "FORWARD"
)

// RulePosition is where EnsureRule puts a new rule: the iptables command flag itself.
type RulePosition string

const (
	// Prepend inserts the rule at the head of the chain ("-I").
	Prepend RulePosition = "-I"
	// Append adds the rule at the tail of the chain ("-A").
	Append RulePosition = "-A"
)

// FlushFlag selects between replacing and patching tables in Restore.
type FlushFlag bool

const (
	// FlushTables makes Restore replace the whole table.
	FlushTables FlushFlag = true
	// NoFlushTables makes Restore pass "--noflush": only the chains declared in the
	// input are flushed, other chains are left alone.
	NoFlushTables FlushFlag = false
)

// RestoreCountersFlag selects whether Restore sets packet and byte counters from the
// input.
type RestoreCountersFlag bool

const (
	// RestoreCounters makes Restore pass "--counters".
	RestoreCounters RestoreCountersFlag = true
	// NoRestoreCounters leaves counters alone.
	NoRestoreCounters RestoreCountersFlag = false
)

// WaitString is the iptables flag that waits for the xtables lock instead of failing.
const WaitString = "-w"

// WaitSecondsValue is how many seconds to wait for the xtables lock.
const WaitSecondsValue = "5"
