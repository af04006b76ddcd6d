package iptables

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// chainSim simulates, for Monitor, the chains and rules of a few (table, chain) pairs:
// -N, -X (refused on a chain that has rules, as the kernel does), -F, -S, -C and -A.
type chainSim struct {
	mu sync.Mutex
	// rules maps "table/chain" of each existing chain to its rules, each the
	// arguments after the chain name joined by spaces.
	rules map[string][]string
	// checkStatus, when non-zero, is the exit status of every -S and -C.
	checkStatus int
	// onCheck, when set, runs (with mu held) before each -C is answered.
	onCheck func(key string)
	// onAppend, when set, runs (with mu held) before each -A is answered.
	onAppend func(key string)
	checks   int
}

func newChainSim() *chainSim { return &chainSim{rules: map[string][]string{}} }

const noChain = "iptables: No chain/target/match by that name."

func (s *chainSim) handle(cmd string, args []string, _ []byte) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(args) == 1 && args[0] == "--version" {
		return result{out: "iptables v1.8.9 (nf_tables)"}
	}
	// args: -w 5 OP CHAIN -t TABLE [RULE...]
	op, key, rule := args[2], args[5]+"/"+args[3], strings.Join(args[6:], " ")
	rules, exists := s.rules[key]
	switch op {
	case "-N":
		if exists {
			return result{out: "iptables: Chain already exists.", status: 1}
		}
		s.rules[key] = nil
	case "-X":
		if !exists {
			return result{out: noChain, status: 1}
		}
		if len(rules) != 0 {
			return result{out: "iptables: Directory not empty.", status: 1}
		}
		delete(s.rules, key)
	case "-F":
		if !exists {
			return result{out: noChain, status: 1}
		}
		s.rules[key] = nil
	case "-S", "-C":
		if op == "-C" {
			s.checks++
		}
		if s.checkStatus != 0 {
			return result{out: "Another app is currently holding the xtables lock.", status: s.checkStatus}
		}
		if op == "-C" {
			if s.onCheck != nil {
				s.onCheck(key)
				rules, exists = s.rules[key]
			}
		}
		if !exists {
			return result{out: noChain, status: 1}
		}
		if op == "-C" && !slices.Contains(rules, rule) {
			return result{out: "iptables: Bad rule (does a matching rule exist in that chain?).", status: 1}
		}
	case "-A":
		if s.onAppend != nil {
			s.onAppend(key)
			rules, exists = s.rules[key]
		}
		if !exists {
			return result{out: noChain, status: 1}
		}
		s.rules[key] = append(rules, rule)
	}
	return result{}
}

// intact reports whether each key's chain exists and holds exactly the canary rule.
func (s *chainSim) intact(keys ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := strings.Join(canaryRule, " ")
	for _, k := range keys {
		if r, ok := s.rules[k]; !ok || len(r) != 1 || r[0] != want {
			return false
		}
	}
	return true
}

// noneIntact reports whether no key holds the canary rule any more.
func (s *chainSim) noneIntact(keys ...string) bool {
	for _, k := range keys {
		if s.intact(k) {
			return false
		}
	}
	return true
}

// flush empties the chains of keys, as "iptables -t T -F" does.
func (s *chainSim) flush(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if _, ok := s.rules[k]; ok {
			s.rules[k] = nil
		}
	}
}

// remove deletes the chains of keys with their rules, as "-F" then "-X" do.
func (s *chainSim) remove(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.rules, k)
	}
}

func (s *chainSim) setCheckStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkStatus = status
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fastSettle is defaultSettle scaled down, to keep the tests quick.
var fastSettle = settleTiming{poll: time.Millisecond, quiet: 20 * time.Millisecond, timeout: 5 * time.Second}

var (
	monitorTables = []Table{TableMangle, TableNAT, TableFilter}
	canaryKeys    = []string{"mangle/CANARY", "nat/CANARY", "filter/CANARY"}
)

// runMonitor starts Monitor on sim with a 10ms interval. reloadFunc runs on each
// reload before it is counted on the returned channel. The returned function stops
// Monitor and waits for it to return.
func runMonitor(t *testing.T, sim *chainSim, timing settleTiming, reloadFunc func()) (<-chan struct{}, func()) {
	t.Helper()
	r := newInternal(&scriptExec{handle: sim.handle}, ProtocolIPv4)
	reloads := make(chan struct{}, 10)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.monitor("CANARY", monitorTables, func() {
			if reloadFunc != nil {
				reloadFunc()
			}
			reloads <- struct{}{}
		}, 10*time.Millisecond, stop, timing)
	}()
	var once sync.Once
	stopMonitor := func() {
		once.Do(func() {
			close(stop)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Monitor did not return after stop")
			}
		})
	}
	t.Cleanup(stopMonitor)
	waitFor(t, "the canaries to be created", func() bool { return sim.intact(canaryKeys...) })
	return reloads, stopMonitor
}

func waitReload(t *testing.T, reloads <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-reloads:
	case <-time.After(10 * time.Second):
		t.Fatalf("no reload after %s", what)
	}
}

// noMoreReloads checks that a few more polls bring no further reload.
func noMoreReloads(t *testing.T, sim *chainSim, reloads <-chan struct{}) {
	t.Helper()
	sim.mu.Lock()
	from := sim.checks
	sim.mu.Unlock()
	waitFor(t, "more polls", func() bool {
		sim.mu.Lock()
		defer sim.mu.Unlock()
		return sim.checks >= from+3*len(canaryKeys)
	})
	if n := len(reloads); n != 0 {
		t.Fatalf("%d extra reloads", n)
	}
}

func TestMonitorRepairsFlushes(t *testing.T) {
	for _, tc := range []struct {
		name string
		// flush changes the sim as something outside kube-proxy would.
		flush func(s *chainSim)
	}{
		{"iptables -F (filter rules only)", func(s *chainSim) { s.flush("filter/CANARY") }},
		{"iptables -t nat -F", func(s *chainSim) { s.flush("nat/CANARY") }},
		{"iptables -t mangle -F", func(s *chainSim) { s.flush("mangle/CANARY") }},
		{"every table flushed, chains kept", func(s *chainSim) { s.flush(canaryKeys...) }},
		{"nat chains deleted", func(s *chainSim) { s.remove("nat/CANARY") }},
		{"firewall reload: every table flushed and its chains deleted", func(s *chainSim) { s.remove(canaryKeys...) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newChainSim()
			reloads, _ := runMonitor(t, sim, fastSettle, nil)
			tc.flush(sim)
			waitReload(t, reloads, tc.name)
			waitFor(t, "the canaries to be recreated", func() bool { return sim.intact(canaryKeys...) })
			noMoreReloads(t, sim, reloads)
		})
	}
}

// A firewall reload that lands while the canaries are being set up makes
// one of them fail (its chain is gone between -N and -A). Canaries made on
// the retry would hide that our rules went too: Monitor reloads once they
// are in place.
func TestMonitorReloadsWhenSetUpRaced(t *testing.T) {
	sim := newChainSim()
	raced := false
	sim.onAppend = func(key string) {
		if key == "filter/CANARY" && !raced {
			raced = true
			for _, k := range canaryKeys {
				delete(sim.rules, k)
			}
		}
	}
	reloads, _ := runMonitor(t, sim, fastSettle, nil)
	waitReload(t, reloads, "a reload during the canaries' set-up")
	noMoreReloads(t, sim, reloads)
}

func TestMonitorIgnoresCheckFailures(t *testing.T) {
	sim := newChainSim()
	reloads, _ := runMonitor(t, sim, defaultSettle, nil)
	// A lock timeout says nothing about the canary: no reload.
	sim.setCheckStatus(4)
	noMoreReloads(t, sim, reloads)
	sim.setCheckStatus(0)
	noMoreReloads(t, sim, reloads)
}

// A firewall reload flushes tables one after the other: Monitor waits for the rest of
// it rather than reloading after the first table.
func TestMonitorWaitsForAStaggeredFlush(t *testing.T) {
	sim := newChainSim()
	var allGoneAtReload bool
	// A long quiet time: only "every canary gone" ends the wait in time.
	reloads, _ := runMonitor(t, sim, settleTiming{poll: time.Millisecond, quiet: time.Hour, timeout: time.Hour}, func() {
		allGoneAtReload = sim.noneIntact(canaryKeys...)
	})
	// The flush reaches mangle first, then nat and filter a few checks later.
	sim.mu.Lock()
	filterChecks := 0
	sim.onCheck = func(key string) {
		if key != "filter/CANARY" {
			return
		}
		if filterChecks++; filterChecks == 3 {
			sim.rules["nat/CANARY"] = nil
		}
		if filterChecks == 5 {
			sim.rules["filter/CANARY"] = nil
			sim.onCheck = nil
		}
	}
	sim.rules["mangle/CANARY"] = nil
	sim.mu.Unlock()

	waitReload(t, reloads, "a staggered flush")
	if !allGoneAtReload {
		t.Error("reloaded before the flush had reached every table")
	}
	waitFor(t, "the canaries to be recreated", func() bool { return sim.intact(canaryKeys...) })
	noMoreReloads(t, sim, reloads)
}

// A flush that stops at some tables is reloaded once quiet, and a flush that keeps
// going is reloaded after the timeout all the same.
func TestMonitorSettleEnds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		timing settleTiming
	}{
		{"quiet", settleTiming{poll: time.Millisecond, quiet: 20 * time.Millisecond, timeout: time.Hour}},
		{"timeout", settleTiming{poll: time.Millisecond, quiet: time.Hour, timeout: 20 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newChainSim()
			reloads, _ := runMonitor(t, sim, tc.timing, nil)
			sim.flush("nat/CANARY")
			waitReload(t, reloads, "a flush of nat only")
			waitFor(t, "the canaries to be recreated", func() bool { return sim.intact(canaryKeys...) })
		})
	}
}

func TestMonitorCleansUpOnStop(t *testing.T) {
	sim := newChainSim()
	_, stop := runMonitor(t, sim, defaultSettle, nil)
	stop()
	sim.mu.Lock()
	defer sim.mu.Unlock()
	if len(sim.rules) != 0 {
		t.Errorf("canaries left behind after stop: %v", sim.rules)
	}
}

// A stop while a flush is settling returns without reloading.
func TestMonitorStopsWhileSettling(t *testing.T) {
	sim := newChainSim()
	reloads, stop := runMonitor(t, sim, settleTiming{poll: time.Millisecond, quiet: time.Hour, timeout: time.Hour}, nil)
	sim.mu.Lock()
	settling := make(chan struct{})
	sim.onCheck = func(key string) {
		if key == "filter/CANARY" {
			close(settling)
			sim.onCheck = nil
		}
	}
	sim.rules["mangle/CANARY"] = nil
	sim.mu.Unlock()
	<-settling
	stop()
	if len(reloads) != 0 {
		t.Error("reloaded after stop")
	}
}

func TestMonitorStopsWithoutTables(t *testing.T) {
	sim := newChainSim()
	r := newInternal(&scriptExec{handle: sim.handle}, ProtocolIPv4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Monitor("CANARY", nil, func() { t.Error("reloaded") }, time.Millisecond, make(chan struct{}))
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Monitor without tables did not return")
	}
}
