//go:build linux

package iptables

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy/util/jumprules"
	utiliptables "k8s.io/net-utils/iptables"
)

// dryRunIPTables is the utiliptables.Interface of a dry run (WithDryRun):
// every restore is written to out instead of the kernel, and reads answer
// as an empty kernel, so the proxier runs its real sync path unchanged. The
// jump rules a full sync ensures with separate calls (all of them, since
// nothing looks present) are printed before that sync's restore input as
// "# ensure:" comment lines, which keeps the whole output valid
// iptables-restore input. Only full syncs read the kernel, so a restore that
// follows a read is headed as a full sync.
type dryRunIPTables struct {
	family v1.IPFamily

	mu      sync.Mutex
	out     io.Writer
	read    bool         // the kernel was read since the last restore
	ensures bytes.Buffer // "# ensure:" lines since the last restore
}

var _ utiliptables.Interface = &dryRunIPTables{}

func newDryRunIPTables(family v1.IPFamily, out io.Writer) *dryRunIPTables {
	return &dryRunIPTables{family: family, out: out}
}

// errNoChain is what iptables says about a chain that does not exist, so
// that utiliptables.IsNotFoundError recognizes it.
func errNoChain(table utiliptables.Table, chain utiliptables.Chain) error {
	return fmt.Errorf("dry run: chain %s in table %s: No chain/target/match by that name", chain, table)
}

// EnsureChain records the call; in an empty kernel the chain is new.
func (d *dryRunIPTables) EnsureChain(table utiliptables.Table, chain utiliptables.Chain) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(&d.ensures, "# ensure: -t %s -N %s\n", table, chain)
	return false, nil
}

// EnsureRule records the call; in an empty kernel the rule is new.
func (d *dryRunIPTables) EnsureRule(position utiliptables.RulePosition, table utiliptables.Table, chain utiliptables.Chain, args ...string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(&d.ensures, "# ensure: -t %s %s %s %s\n", table, position, chain, jumprules.QuoteArgs(args))
	return false, nil
}

// WantsEnsureCalls makes jumprules.Ensure add the jumps as separate Ensure
// calls, so each is printed as an "# ensure:" line.
func (d *dryRunIPTables) WantsEnsureCalls() bool { return true }

func (d *dryRunIPTables) FlushChain(table utiliptables.Table, chain utiliptables.Chain) error {
	return errNoChain(table, chain)
}

func (d *dryRunIPTables) DeleteChain(table utiliptables.Table, chain utiliptables.Chain) error {
	return errNoChain(table, chain)
}

func (d *dryRunIPTables) ChainExists(table utiliptables.Table, chain utiliptables.Chain) (bool, error) {
	return false, errNoChain(table, chain)
}

// DeleteRule succeeds: a rule that is absent is not an error.
func (d *dryRunIPTables) DeleteRule(utiliptables.Table, utiliptables.Chain, ...string) error {
	return nil
}

func (d *dryRunIPTables) IsIPv6() bool { return d.family == v1.IPv6Protocol }

func (d *dryRunIPTables) Protocol() utiliptables.Protocol {
	if d.IsIPv6() {
		return utiliptables.ProtocolIPv6
	}
	return utiliptables.ProtocolIPv4
}

// SaveInto adds nothing: the kernel is empty.
func (d *dryRunIPTables) SaveInto(utiliptables.Table, *bytes.Buffer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.read = true
	return nil
}

func (d *dryRunIPTables) Restore(_ utiliptables.Table, data []byte, _ utiliptables.FlushFlag, _ utiliptables.RestoreCountersFlag) error {
	return d.write(data)
}

func (d *dryRunIPTables) RestoreAll(data []byte, _ utiliptables.FlushFlag, _ utiliptables.RestoreCountersFlag) error {
	return d.write(data)
}

// write prints one sync: a header, the ensured jump rules, the restore input.
func (d *dryRunIPTables) write(data []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b bytes.Buffer
	fmt.Fprintf(&b, "# kube-proxy iptables dry run: family=%s fullSync=%v\n", d.family, d.read)
	b.Write(d.ensures.Bytes())
	b.Write(data)
	d.read = false
	d.ensures.Reset()
	if _, err := d.out.Write(b.Bytes()); err != nil {
		return fmt.Errorf("writing dry-run output: %w", err)
	}
	return nil
}

// Monitor has nothing to watch; it returns when stopCh is closed.
func (d *dryRunIPTables) Monitor(_ utiliptables.Chain, _ []utiliptables.Table, _ func(), _ time.Duration, stopCh <-chan struct{}) {
	<-stopCh
}

func (d *dryRunIPTables) Present() error { return nil }
