package iptables

import (
	"time"

	"k8s.io/klog/v2"
)

// settleTiming says how Monitor waits for a flush in progress to finish.
type settleTiming struct {
	// poll is how often to look at the other tables once a canary is gone.
	poll time.Duration
	// quiet: the flush is taken to be over once no further canary has vanished for
	// this long.
	quiet time.Duration
	// timeout: however long the flush keeps going, reload after this long; what is
	// flushed later is noticed on the next check.
	timeout time.Duration
}

// defaultSettle: a firewall reload flushes its tables milliseconds apart, so the quiet
// time is ample, and short enough that a flush of one table (which never takes the
// other canaries with it) is still repaired within a poll interval or so.
var defaultSettle = settleTiming{poll: 100 * time.Millisecond, quiet: 300 * time.Millisecond, timeout: 5 * time.Second}

// canaryRule is the one rule Monitor keeps in each canary chain. Nothing jumps to the
// chain, so the rule never sees a packet; it is there because "iptables -F" and
// "iptables -t nat -F" empty every chain but delete none, and a chain alone would
// survive them. The comment tells whoever lists the chain what it is for.
var canaryRule = []string{"-m", "comment", "--comment", "kube-proxy canary: removing this rule makes kube-proxy rewrite its rules", "-j", "RETURN"}

// Monitor is part of Interface.
//
// Each interval it checks, with one "iptables -C" per table, that the canary rule is in
// the canary chain of every table; "-C" fails alike whether the chain was deleted or
// only emptied, and prints nothing, so nothing is listed or parsed. Unlike upstream,
// which polls tables[0] only, every table is checked: a flush of nat alone leaves the
// mangle canary in place but takes every Service rule with it. The price is small:
// iptables-nft fetches only the canary chain (about 4 ms with 10k Services in nat);
// iptables-legacy reads the whole table from the kernel for any command (about 0.1 s of
// CPU for a 10k-Service nat table), once per interval, normally the sync period.
//
// Once some canary is gone it waits for the flush to finish before calling
// reloadFunc, since a firewall reload flushes tables one after the other and
// reloading halfway would have our rules flushed again right after. The flush is over
// when every canary is gone (the firewall-reload case, reloaded at once), or when no
// further canary has vanished for a short quiet time (a flush of some tables only),
// and at the latest after a few seconds.
func (r *runner) Monitor(canary Chain, tables []Table, reloadFunc func(), interval time.Duration, stopCh <-chan struct{}) {
	r.monitor(canary, tables, reloadFunc, interval, stopCh, defaultSettle)
}

func (r *runner) monitor(canary Chain, tables []Table, reloadFunc func(), interval time.Duration, stopCh <-chan struct{}, timing settleTiming) {
	logger := klog.Background().WithValues("canary", canary)
	if len(tables) == 0 {
		logger.Error(nil, "iptables Monitor called without tables; not monitoring")
		return
	}
	defer func() {
		for _, table := range tables {
			// The chain holds the canary rule: empty it first, or -X fails.
			_ = r.FlushChain(table, canary)
			_ = r.DeleteChain(table, canary)
		}
	}()

	for {
		attempts := 0
		created := poll(interval, true, stopCh, func() bool {
			attempts++
			return r.ensureCanaries(logger, tables, canary)
		})
		if !created {
			return
		}
		if attempts > 1 {
			// Setting the canaries up failed part way, typically because a
			// chain made a moment earlier was already gone: someone was
			// deleting chains meanwhile. Canaries made after that would
			// hide the deletion of our rules, so rewrite them now. (Seen
			// when a firewall reload raced kube-proxy's start-up.)
			logger.Info("iptables tables changed while the canaries were set up; rewriting our rules")
			reloadFunc()
		}

		gone := make([]bool, len(tables))
		flushed := poll(interval, false, stopCh, func() bool {
			return r.checkCanaries(logger, tables, canary, gone) > 0
		})
		if !flushed {
			return
		}
		logger.V(2).Info("iptables canary gone", "tables", goneTables(tables, gone))

		if !r.settle(logger, tables, canary, gone, stopCh, timing) {
			return
		}
		logger.Info("Our iptables rules were flushed or deleted by someone else; rewriting them", "tables", goneTables(tables, gone))
		reloadFunc()
	}
}

// ensureCanaries creates the canary chain and its rule in every table, reporting
// whether all of them are in place.
func (r *runner) ensureCanaries(logger klog.Logger, tables []Table, canary Chain) bool {
	for _, table := range tables {
		if _, err := r.EnsureChain(table, canary); err != nil {
			logger.Error(err, "Could not set up iptables canary chain", "table", table)
			return false
		}
		if _, err := r.EnsureRule(Append, table, canary, canaryRule...); err != nil {
			logger.Error(err, "Could not set up iptables canary rule", "table", table)
			return false
		}
	}
	return true
}

// checkCanaries marks in gone the tables whose canary is newly gone, skipping those
// already marked, and returns how many it marked.
func (r *runner) checkCanaries(logger klog.Logger, tables []Table, canary Chain, gone []bool) int {
	n := 0
	for i, table := range tables {
		if !gone[i] && r.canaryGone(logger, table, canary) {
			gone[i] = true
			n++
		}
	}
	return n
}

// settle waits until the flush that took some canaries (marked in gone) is over. It
// returns false if stopCh was closed meanwhile.
func (r *runner) settle(logger klog.Logger, tables []Table, canary Chain, gone []bool, stopCh <-chan struct{}, timing settleTiming) bool {
	deadline := time.Now().Add(timing.timeout)
	quietUntil := time.Now().Add(timing.quiet)
	for {
		if len(goneTables(tables, gone)) == len(tables) {
			return true
		}
		now := time.Now()
		if now.After(quietUntil) {
			return true
		}
		if now.After(deadline) {
			logger.Info("iptables tables still being flushed; reloading anyway", "tables", goneTables(tables, gone))
			return true
		}
		select {
		case <-stopCh:
			return false
		case <-time.After(timing.poll):
		}
		if r.checkCanaries(logger, tables, canary, gone) > 0 {
			quietUntil = time.Now().Add(timing.quiet)
		}
	}
}

// canaryGone reports whether the canary rule is definitely missing from table, with
// or without its chain. Failures that say nothing about the rule (lock timeouts, a
// binary that cannot run) count as "still there", so they do not trigger a reload
// storm.
func (r *runner) canaryGone(logger klog.Logger, table Table, canary Chain) bool {
	exists, err := r.checkRule(chainArgs(table, canary, canaryRule...))
	if err != nil {
		logger.Error(err, "Could not check for iptables canary", "table", table)
		return false
	}
	return !exists
}

func goneTables(tables []Table, gone []bool) []Table {
	var out []Table
	for i, g := range gone {
		if g {
			out = append(out, tables[i])
		}
	}
	return out
}

// poll calls cond every interval (and once at the start when immediate) until it
// returns true, and then returns true; it returns false once stopCh is closed.
func poll(interval time.Duration, immediate bool, stopCh <-chan struct{}, cond func() bool) bool {
	select {
	case <-stopCh:
		return false
	default:
	}
	if immediate && cond() {
		return true
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-stopCh:
			return false
		case <-ticker.C:
			if cond() {
				return true
			}
		}
	}
}
