package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"
)

const (
	cmdIPTables         = "iptables"
	cmdIPTablesSave     = "iptables-save"
	cmdIPTablesRestore  = "iptables-restore"
	cmdIP6Tables        = "ip6tables"
	cmdIP6TablesSave    = "ip6tables-save"
	cmdIP6TablesRestore = "ip6tables-restore"

	// defaultLockPath is the xtables lock file iptables >= 1.6 uses.
	defaultLockPath = "/run/xtables.lock"

	// checkRuleTimeout bounds "iptables -C": on hosts with huge rulesets it can take
	// minutes, but a hung process must not wedge the caller forever.
	checkRuleTimeout = 5 * time.Minute
)

// operation is the iptables command flag for one operation.
type operation string

const (
	opCreateChain operation = "-N"
	opFlushChain  operation = "-F"
	opDeleteChain operation = "-X"
	opListChain   operation = "-S"
	opCheckRule   operation = "-C"
	opDeleteRule  operation = "-D"
)

// runner implements Interface by executing the iptables binaries.
type runner struct {
	exec     utilexec.Interface
	protocol Protocol

	// Binaries to run; tests point these at iptables-legacy or iptables-nft.
	cmdIPTables, cmdSave, cmdRestore string

	lockPath    string
	lockTimeout time.Duration

	featuresOnce sync.Once
	features     Features
}

// option adjusts a runner built by newInternal.
type option func(*runner)

// withCommands makes the runner exec the given binaries instead of the defaults.
func withCommands(iptables, save, restore string) option {
	return func(r *runner) {
		r.cmdIPTables, r.cmdSave, r.cmdRestore = iptables, save, restore
	}
}

// withLockFile sets the lock file taken around iptables-restore when it cannot wait.
func withLockFile(path string) option {
	return func(r *runner) { r.lockPath = path }
}

// withFeatures skips detection and uses f.
func withFeatures(f Features) option {
	return func(r *runner) {
		r.featuresOnce.Do(func() { r.features = f })
	}
}

func newInternal(exec utilexec.Interface, protocol Protocol, opts ...option) *runner {
	r := &runner{
		exec:        exec,
		protocol:    protocol,
		cmdIPTables: cmdIPTables,
		cmdSave:     cmdIPTablesSave,
		cmdRestore:  cmdIPTablesRestore,
		lockPath:    defaultLockPath,
		lockTimeout: 5 * time.Second,
	}
	if protocol == ProtocolIPv6 {
		r.cmdIPTables, r.cmdSave, r.cmdRestore = cmdIP6Tables, cmdIP6TablesSave, cmdIP6TablesRestore
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// New returns an Interface that execs iptables (ProtocolIPv4) or ip6tables
// (ProtocolIPv6). It runs nothing until first used; the version is detected then.
func New(protocol Protocol) Interface {
	return newInternal(utilexec.New(), protocol)
}

// NewBestEffort returns an Interface for each IP family whose iptables is Present, and
// an empty map when neither is. For callers to whom missing iptables is not an error.
func NewBestEffort() map[v1.IPFamily]Interface {
	return newBestEffort(utilexec.New())
}

func newBestEffort(exec utilexec.Interface, opts ...option) map[v1.IPFamily]Interface {
	out := map[v1.IPFamily]Interface{}
	for family, proto := range map[v1.IPFamily]Protocol{v1.IPv4Protocol: ProtocolIPv4, v1.IPv6Protocol: ProtocolIPv6} {
		r := newInternal(exec, proto, opts...)
		if r.Present() == nil {
			out[family] = r
		}
	}
	return out
}

// Features implements FeatureDetector.
func (r *runner) Features() Features {
	r.featuresOnce.Do(func() {
		out, err := r.exec.Command(r.cmdIPTables, "--version").CombinedOutput()
		if err == nil {
			var f Features
			f, err = parseVersionOutput(string(out))
			if err == nil {
				r.features = f
				klog.V(2).InfoS("Detected iptables", "command", r.cmdIPTables, "version", f.Version, "variant", f.Variant)
				return
			}
		}
		klog.V(2).InfoS("Could not detect the iptables version, assuming a modern one", "command", r.cmdIPTables, "err", err, "output", string(out))
		r.features = assumedFeatures
	})
	return r.features
}

// IsIPv6 is part of Interface.
func (r *runner) IsIPv6() bool { return r.protocol == ProtocolIPv6 }

// Protocol is part of Interface.
func (r *runner) Protocol() Protocol { return r.protocol }

func chainArgs(table Table, chain Chain, args ...string) []string {
	return append([]string{string(chain), "-t", string(table)}, args...)
}

// run executes one iptables operation and returns its combined output.
func (r *runner) run(ctx context.Context, op operation, args []string) ([]byte, error) {
	full := append(r.Features().waitArgs(), string(op))
	full = append(full, args...)
	klog.V(5).InfoS("Running", "command", r.cmdIPTables, "arguments", full)
	return r.exec.CommandContext(ctx, r.cmdIPTables, full...).CombinedOutput()
}

// exitStatus returns the exit status of a process that ran and exited, or -1.
func exitStatus(err error) int {
	var ee utilexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ee.ExitStatus()
	}
	return -1
}

// EnsureChain is part of Interface.
func (r *runner) EnsureChain(table Table, chain Chain) (bool, error) {
	out, err := r.run(context.Background(), opCreateChain, chainArgs(table, chain))
	if err != nil {
		// Exit status 1 is iptables' "the operation failed" as opposed to bad usage or
		// a resource problem; for -N that means the chain is already there.
		if exitStatus(err) == 1 {
			return true, nil
		}
		return false, fmt.Errorf("creating chain %s in table %s: %w: %s", chain, table, err, trimOutput(out))
	}
	return false, nil
}

// FlushChain is part of Interface.
func (r *runner) FlushChain(table Table, chain Chain) error {
	if out, err := r.run(context.Background(), opFlushChain, chainArgs(table, chain)); err != nil {
		return fmt.Errorf("flushing chain %s in table %s: %w: %s", chain, table, err, trimOutput(out))
	}
	return nil
}

// DeleteChain is part of Interface.
func (r *runner) DeleteChain(table Table, chain Chain) error {
	if out, err := r.run(context.Background(), opDeleteChain, chainArgs(table, chain)); err != nil {
		return fmt.Errorf("deleting chain %s in table %s: %w: %s", chain, table, err, trimOutput(out))
	}
	return nil
}

// ChainExists is part of Interface.
func (r *runner) ChainExists(table Table, chain Chain) (bool, error) {
	if out, err := r.run(context.Background(), opListChain, chainArgs(table, chain)); err != nil {
		return false, fmt.Errorf("listing chain %s in table %s: %w: %s", chain, table, err, trimOutput(out))
	}
	return true, nil
}

// EnsureRule is part of Interface.
func (r *runner) EnsureRule(position RulePosition, table Table, chain Chain, args ...string) (bool, error) {
	full := chainArgs(table, chain, args...)
	exists, err := r.checkRule(full)
	if err != nil {
		return false, err
	}
	if exists {
		return true, nil
	}
	if out, err := r.run(context.Background(), operation(position), full); err != nil {
		return false, fmt.Errorf("adding rule %q to chain %s in table %s: %w: %s", strings.Join(args, " "), chain, table, err, trimOutput(out))
	}
	return false, nil
}

// DeleteRule is part of Interface.
func (r *runner) DeleteRule(table Table, chain Chain, args ...string) error {
	full := chainArgs(table, chain, args...)
	exists, err := r.checkRule(full)
	if err != nil {
		return err
	}
	if !exists {
		return nil
	}
	if out, err := r.run(context.Background(), opDeleteRule, full); err != nil {
		return fmt.Errorf("deleting rule %q from chain %s in table %s: %w: %s", strings.Join(args, " "), chain, table, err, trimOutput(out))
	}
	return nil
}

// checkRule reports whether the rule in args (chain, table and match) exists.
func (r *runner) checkRule(args []string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), checkRuleTimeout)
	defer cancel()
	out, err := r.run(ctx, opCheckRule, args)
	if ctx.Err() != nil {
		return false, fmt.Errorf("checking rule %q: timed out after %v", strings.Join(args, " "), checkRuleTimeout)
	}
	if err == nil {
		return true, nil
	}
	if exitStatus(err) == 1 {
		return false, nil
	}
	return false, fmt.Errorf("checking rule %q: %w: %s", strings.Join(args, " "), err, trimOutput(out))
}

// SaveInto is part of Interface.
func (r *runner) SaveInto(table Table, buffer *bytes.Buffer) error {
	start := time.Now()
	args := []string{"-t", string(table)}
	klog.V(4).InfoS("Running", "command", r.cmdSave, "arguments", args)
	cmd := r.exec.Command(r.cmdSave, args...)
	cmd.SetStdout(buffer)
	var stderr bytes.Buffer
	cmd.SetStderr(&stderr)
	err := cmd.Run()
	logIfSlow("iptables save", start, "table", table)
	if err != nil {
		return fmt.Errorf("%s -t %s: %w: %s", r.cmdSave, table, err, trimOutput(stderr.Bytes()))
	}
	return nil
}

// Restore is part of Interface.
func (r *runner) Restore(table Table, data []byte, flush FlushFlag, counters RestoreCountersFlag) error {
	return r.restore([]string{"-T", string(table)}, data, flush, counters)
}

// RestoreAll is part of Interface.
func (r *runner) RestoreAll(data []byte, flush FlushFlag, counters RestoreCountersFlag) error {
	return r.restore(nil, data, flush, counters)
}

func (r *runner) restore(args []string, data []byte, flush FlushFlag, counters RestoreCountersFlag) error {
	start := time.Now()
	defer logIfSlow("iptables restore", start, "bytes", len(data))

	if !flush {
		args = append(args, "--noflush")
	}
	if counters {
		args = append(args, "--counters")
	}
	f := r.Features()
	if f.RestoreWait {
		args = append([]string{WaitString, WaitSecondsValue}, args...)
	} else {
		// This iptables-restore would fail at once on a held lock instead of waiting,
		// so serialize with other xtables users by holding the lock ourselves.
		unlock, err := grabLock(r.lockPath, r.lockTimeout)
		if err != nil {
			return fmt.Errorf("%s: %w", r.cmdRestore, err)
		}
		defer unlock()
	}

	klog.V(4).InfoS("Running", "command", r.cmdRestore, "arguments", args)
	cmd := r.exec.Command(r.cmdRestore, args...)
	cmd.SetStdin(bytes.NewReader(data))
	out, err := cmd.CombinedOutput()
	if err != nil {
		if pErr, ok := parseRestoreError(r.cmdRestore, string(out), err); ok {
			return pErr
		}
		return fmt.Errorf("%s %s: %w: %s", r.cmdRestore, strings.Join(args, " "), err, trimOutput(out))
	}
	return nil
}

// Present is part of Interface.
func (r *runner) Present() error {
	_, err := r.ChainExists(TableNAT, ChainPostrouting)
	return err
}

// trimOutput keeps error messages on one readable line.
func trimOutput(out []byte) string {
	return strings.TrimSpace(string(out))
}

func logIfSlow(what string, start time.Time, kv ...any) {
	if d := time.Since(start); d > 2*time.Second {
		klog.InfoS("Slow "+what, append([]any{"duration", d}, kv...)...)
	}
}

var (
	_ Interface       = (*runner)(nil)
	_ FeatureDetector = (*runner)(nil)
)
