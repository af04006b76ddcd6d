//go:build linux

package iptables

import (
	"bytes"
	"strings"
	"testing"

	utiliptables "k8s.io/net-utils/iptables"
)

// jumpCountingIPTables passes everything through and counts what the
// syncer's jump handling does: Ensure calls, and restores that insert into
// builtin chains (the jump restore), failed or not. beforeJumps, if set,
// runs just before each jump restore.
type jumpCountingIPTables struct {
	utiliptables.Interface
	ensures, jumpRestores, failedJumpRestores int
	beforeJumps                               func()
}

func (c *jumpCountingIPTables) EnsureChain(table utiliptables.Table, chain utiliptables.Chain) (bool, error) {
	c.ensures++
	return c.Interface.EnsureChain(table, chain)
}

func (c *jumpCountingIPTables) EnsureRule(pos utiliptables.RulePosition, table utiliptables.Table, chain utiliptables.Chain, args ...string) (bool, error) {
	c.ensures++
	return c.Interface.EnsureRule(pos, table, chain, args...)
}

func (c *jumpCountingIPTables) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	if !bytes.Contains(data, []byte("\n-I ")) {
		return c.Interface.RestoreAll(data, flush, counters)
	}
	c.jumpRestores++
	if c.beforeJumps != nil {
		c.beforeJumps()
	}
	err := c.Interface.RestoreAll(data, flush, counters)
	if err != nil {
		c.failedJumpRestores++
	}
	return err
}

// On a cold start the missing jumps go in one restore, not as Ensure
// calls; a full sync that finds them all makes neither; a missing one is
// put back the same way.
func TestJumpRulesInOneRestore(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			env := newTestEnv(t, f, envConfig{})
			ipt := &jumpCountingIPTables{Interface: env.p.syncer.ipt}
			env.p.syncer.ipt = ipt
			checkJumpSyncs(t, env, ipt, func() string { return env.dump(t) })
		})
	}
}

// checkJumpSyncs runs the cold start, a full sync with every jump present,
// and one with a jump deleted, and checks how the jumps were added.
func checkJumpSyncs(t *testing.T, env *testEnv, ipt *jumpCountingIPTables, dump func() string) {
	t.Helper()
	f := env.f
	env.p.OnServiceAdd(f.stdService(nil))
	env.p.OnEndpointSliceAdd(f.stdSlice())
	env.start(t)
	if ipt.ensures != 0 || ipt.jumpRestores != 1 || ipt.failedJumpRestores != 0 {
		t.Errorf("cold start: %d Ensure calls, %d jump restores (%d failed); want 0, 1, 0", ipt.ensures, ipt.jumpRestores, ipt.failedJumpRestores)
	}
	checkEveryJumpOnce(t, countJumps(dump()))

	env.p.forceSyncProxyRules()
	if ipt.ensures != 0 || ipt.jumpRestores != 1 {
		t.Errorf("full sync with every jump present: %d Ensure calls, %d jump restores in all; want 0, 1", ipt.ensures, ipt.jumpRestores)
	}

	j := jumpRules[0]
	if err := ipt.DeleteRule(j.Table, j.Src, j.Args()...); err != nil {
		t.Fatal(err)
	}
	env.p.forceSyncProxyRules()
	if ipt.ensures != 0 || ipt.jumpRestores != 2 || ipt.failedJumpRestores != 0 {
		t.Errorf("repair: %d Ensure calls, %d jump restores (%d failed) in all; want 0, 2, 0", ipt.ensures, ipt.jumpRestores, ipt.failedJumpRestores)
	}
	checkEveryJumpOnce(t, countJumps(dump()))
}

// A chain created by someone else between the syncer's save and its jump
// restore makes the restore's "-N" fail, rather than flushing that chain;
// the jumps are then ensured one by one and the other owner's rule stays.
// (Without localhost NodePorts kube-proxy writes nothing in kubelet's
// KUBE-FIREWALL; with them its own restore would rewrite the chain anyway.)
func TestJumpRestoreRaceFallsBack(t *testing.T) {
	f := families[0]
	noLocalhost := false
	env := newTestEnv(t, f, envConfig{localhostNodePorts: &noLocalhost})
	ipt := &jumpCountingIPTables{Interface: env.p.syncer.ipt}
	ipt.beforeJumps = func() {
		ipt.beforeJumps = nil
		if _, err := env.ipt.EnsureChain(utiliptables.TableFilter, kubeletFirewallChain); err != nil {
			t.Fatal(err)
		}
		if _, err := env.ipt.EnsureRule(utiliptables.Append, utiliptables.TableFilter, kubeletFirewallChain, "-m", "comment", "--comment", "kubelet's", "-j", "DROP"); err != nil {
			t.Fatal(err)
		}
	}
	env.p.syncer.ipt = ipt
	env.p.OnServiceAdd(f.stdService(nil))
	env.p.OnEndpointSliceAdd(f.stdSlice())
	env.start(t)
	if ipt.failedJumpRestores != 1 || ipt.ensures == 0 {
		t.Errorf("%d failed jump restores and %d Ensure calls; want 1 and some", ipt.failedJumpRestores, ipt.ensures)
	}
	if !env.p.Initialized() || env.p.NeedsFullSync() {
		t.Errorf("the sync failed")
	}
	text := env.dump(t)
	checkEveryJumpOnce(t, countJumps(text))
	if !strings.Contains(text, `-A KUBE-FIREWALL -m comment --comment kubelet's -j DROP`) {
		t.Errorf("the other owner's rule is gone:\n%s", text)
	}
}

// The jump restore is valid input for the kernel's iptables-restore, on
// both backends: no Ensure call and no failed restore on a cold start.
func TestKernelJumpRulesInOneRestore(t *testing.T) {
	eachBackend(t, func(t *testing.T, variant string, f fam) {
		real, _ := kernelIPTables(t, variant, f)
		ipt := &jumpCountingIPTables{Interface: real}
		env := kernelProxier(t, f, ipt)
		checkJumpSyncs(t, env, ipt, func() string { return save(t, real) })
	})
}
