package iptables

import (
	"time"

	"k8s.io/klog/v2"
)

const (
	// After the canary vanishes from the first table, how long to wait for the rest of
	// a flush to land before reloading anyway, and how often to look.
	flushSettleTimeout = 5 * time.Second
	flushSettlePoll    = 100 * time.Millisecond
)

// Monitor is part of Interface.
func (r *runner) Monitor(canary Chain, tables []Table, reloadFunc func(), interval time.Duration, stopCh <-chan struct{}) {
	logger := klog.Background().WithValues("canary", canary)
	if len(tables) == 0 {
		logger.Error(nil, "iptables Monitor called without tables; not monitoring")
		return
	}
	defer func() {
		for _, table := range tables {
			_ = r.DeleteChain(table, canary)
		}
	}()

	for {
		created := poll(interval, true, stopCh, func() bool {
			for _, table := range tables {
				if _, err := r.EnsureChain(table, canary); err != nil {
					logger.Error(err, "Could not set up iptables canary", "table", table)
					return false
				}
			}
			return true
		})
		if !created {
			return
		}

		flushed := poll(interval, false, stopCh, func() bool {
			return r.canaryGone(logger, tables[0], canary)
		})
		if !flushed {
			return
		}
		logger.V(2).Info("iptables canary deleted", "table", tables[0])

		// A firewall reload flushes tables one at a time; reloading before it is done
		// would have our rules flushed again right after.
		deadline := time.Now().Add(flushSettleTimeout)
		for !r.allCanariesGone(logger, tables[1:], canary) {
			if time.Now().After(deadline) {
				logger.Info("Inconsistent iptables state detected: canary still present in some tables")
				break
			}
			select {
			case <-stopCh:
				return
			case <-time.After(flushSettlePoll):
			}
		}

		logger.V(2).Info("Reloading after iptables flush")
		reloadFunc()
	}
}

// canaryGone reports whether the canary is definitely missing from table. Failures
// that say nothing about the chain (lock timeouts, a binary that cannot run) count as
// "still there", so they do not trigger a reload storm.
func (r *runner) canaryGone(logger klog.Logger, table Table, canary Chain) bool {
	exists, err := r.ChainExists(table, canary)
	if exists {
		return false
	}
	if exitStatus(err) != 1 {
		logger.Error(err, "Could not check for iptables canary", "table", table)
		return false
	}
	return true
}

func (r *runner) allCanariesGone(logger klog.Logger, tables []Table, canary Chain) bool {
	for _, table := range tables {
		if !r.canaryGone(logger, table, canary) {
			return false
		}
	}
	return true
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
