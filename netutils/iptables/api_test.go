// Compile-time checks that the exported API keeps upstream v1.37 signatures; callers
// migrate by rewriting the import path, so any change here breaks them.

package iptables_test

import (
	"bytes"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/net-utils/iptables"
	iptablestest "k8s.io/net-utils/iptables/testing"
)

var (
	_ func(iptables.Protocol) iptables.Interface       = iptables.New
	_ func() map[v1.IPFamily]iptables.Interface        = iptables.NewBestEffort
	_ func([]byte) sets.Set[iptables.Chain]            = iptables.GetChainsFromTable
	_ func(error) bool                                 = iptables.IsNotFoundError
	_ func(iptables.Chain) string                      = iptables.MakeChainLine
	_ func([]byte, int, int) []iptables.LineData       = iptables.ExtractLines
	_ func(string) (*iptablestest.IPTablesDump, error) = iptablestest.ParseIPTablesDump
	_ func(string, bool) (*iptablestest.Rule, error)   = iptablestest.ParseRule
	_ func() *iptablestest.FakeIPTables                = iptablestest.NewFake
	_ func() *iptablestest.FakeIPTables                = iptablestest.NewIPv6Fake
	_ iptables.Interface                               = iptablestest.NewFake()
	_                                                  = iptables.LineData{Line: 1, Data: ""}
	_ string                                           = iptables.WaitString + iptables.WaitSecondsValue
	_                                                  = []any{iptables.ProtocolIPv4, iptables.ProtocolIPv6, iptables.TableNAT, iptables.TableFilter, iptables.TableMangle,
		iptables.ChainPostrouting, iptables.ChainPrerouting, iptables.ChainOutput, iptables.ChainInput, iptables.ChainForward,
		iptables.Prepend, iptables.Append, iptables.FlushTables, iptables.NoFlushTables, iptables.RestoreCounters, iptables.NoRestoreCounters}
	_ interface {
		EnsureChain(table iptables.Table, chain iptables.Chain) (bool, error)
		FlushChain(table iptables.Table, chain iptables.Chain) error
		DeleteChain(table iptables.Table, chain iptables.Chain) error
		ChainExists(table iptables.Table, chain iptables.Chain) (bool, error)
		EnsureRule(position iptables.RulePosition, table iptables.Table, chain iptables.Chain, args ...string) (bool, error)
		DeleteRule(table iptables.Table, chain iptables.Chain, args ...string) error
		IsIPv6() bool
		Protocol() iptables.Protocol
		SaveInto(table iptables.Table, buffer *bytes.Buffer) error
		Restore(table iptables.Table, data []byte, flush iptables.FlushFlag, counters iptables.RestoreCountersFlag) error
		RestoreAll(data []byte, flush iptables.FlushFlag, counters iptables.RestoreCountersFlag) error
		Monitor(canary iptables.Chain, tables []iptables.Table, reloadFunc func(), interval time.Duration, stopCh <-chan struct{})
		Present() error
	} = iptables.Interface(nil)
)

func apiCheckParseError(e iptables.ParseError) (int, string) { return e.Line(), e.Error() }

func apiCheckDump(d *iptablestest.IPTablesDump, f *iptablestest.FakeIPTables, v *iptablestest.IPTablesValue) {
	t, _ := d.GetTable(iptables.TableNAT)
	c, _ := d.GetChain(iptables.TableNAT, "X")
	_ = d.String()
	_, _ = t.Name, t.Chains
	_, _, _, _, _ = c.Name, c.Packets, c.Bytes, c.Rules, c.Deleted
	_ = f.Dump
	_, _ = v.Matches(""), v.String()
	r := &iptablestest.Rule{}
	_ = []any{r.Raw, r.Chain, r.Comment, r.Protocol, r.SourceAddress, r.SourceType, r.SourcePort, r.DestinationAddress, r.DestinationType, r.DestinationPort, r.MatchSet, r.Jump, r.RandomFully, r.Probability, r.DNATDestination, r.AffinityCheck, r.MarkCheck, r.CTStateCheck, r.AffinityName, r.AffinitySeconds, r.AffinitySet, r.AffinityReap, r.StatisticMode}
}
