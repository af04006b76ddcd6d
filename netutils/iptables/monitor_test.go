package iptables

import (
	"sync"
	"testing"
	"time"
)

// chainSim simulates iptables chain existence for Monitor: -N, -S and -X on a set of
// (table, chain), with an optional injected exit status for -S.
type chainSim struct {
	mu       sync.Mutex
	chains   map[string]bool
	sStatus  int // when non-zero, every -S exits with it
	creates  int
	deletes  int
	listings int
}

func (s *chainSim) handle(cmd string, args []string, _ []byte) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(args) == 1 && args[0] == "--version" {
		return result{out: "iptables v1.8.9 (nf_tables)"}
	}
	// args: -w 5 OP CHAIN -t TABLE
	op, key := args[2], args[5]+"/"+args[3]
	switch op {
	case "-N":
		s.creates++
		if s.chains[key] {
			return result{out: "iptables: Chain already exists.", status: 1}
		}
		s.chains[key] = true
	case "-S":
		s.listings++
		if s.sStatus != 0 {
			return result{out: "Another app is currently holding the xtables lock.", status: s.sStatus}
		}
		if !s.chains[key] {
			return result{out: "iptables: No chain/target/match by that name.", status: 1}
		}
	case "-X":
		s.deletes++
		if !s.chains[key] {
			return result{out: "iptables: No chain/target/match by that name.", status: 1}
		}
		delete(s.chains, key)
	}
	return result{}
}

func (s *chainSim) has(keys ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if !s.chains[k] {
			return false
		}
	}
	return true
}

func (s *chainSim) remove(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.chains, k)
	}
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

func TestMonitor(t *testing.T) {
	sim := &chainSim{chains: map[string]bool{}}
	r := newInternal(&scriptExec{handle: sim.handle}, ProtocolIPv4)
	canaries := []string{"mangle/CANARY", "nat/CANARY", "filter/CANARY"}

	reloads := make(chan struct{}, 10)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Monitor("CANARY", []Table{TableMangle, TableNAT, TableFilter}, func() { reloads <- struct{}{} }, 10*time.Millisecond, stop)
	}()

	waitFor(t, "the canaries to be created", func() bool { return sim.has(canaries...) })

	// A lock timeout says nothing about the canary: no reload.
	sim.mu.Lock()
	sim.sStatus = 4
	sim.mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-reloads:
		t.Fatal("reloaded although the canary could not be checked")
	default:
	}
	sim.mu.Lock()
	sim.sStatus = 0
	sim.mu.Unlock()

	// An external flush of every table triggers exactly one reload, and the canaries
	// come back.
	sim.remove(canaries...)
	select {
	case <-reloads:
	case <-time.After(10 * time.Second):
		t.Fatal("no reload after the canaries were deleted")
	}
	waitFor(t, "the canaries to be recreated", func() bool { return sim.has(canaries...) })
	time.Sleep(50 * time.Millisecond)
	if n := len(reloads); n != 0 {
		t.Fatalf("%d extra reloads", n)
	}

	close(stop)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Monitor did not return after stop")
	}
	sim.mu.Lock()
	defer sim.mu.Unlock()
	if len(sim.chains) != 0 {
		t.Errorf("canaries left behind after stop: %v", sim.chains)
	}
}

func TestMonitorStopsWithoutTables(t *testing.T) {
	sim := &chainSim{chains: map[string]bool{}}
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
