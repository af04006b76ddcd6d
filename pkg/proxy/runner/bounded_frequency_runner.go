package runner

import (
	"fmt"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// BoundedFrequencyRunner calls a work function when asked to (Run), but:
//   - never sooner than minInterval after the previous call returned, folding
//     every request made meanwhile into a single call;
//   - at least once every maxInterval, measured from the end of the previous
//     call, even if nobody asks;
//   - within retryInterval (if shorter than maxInterval) after a call that
//     returned an error.
//
// Calls happen only inside Loop, one at a time.
type BoundedFrequencyRunner struct {
	name          string
	fn            func() error
	minInterval   time.Duration
	retryInterval time.Duration
	maxInterval   time.Duration
	clock         clock.Clock

	// run holds at most one pending request; extra requests are dropped
	// because the pending one already covers them.
	run chan struct{}
}

// NewBoundedFrequencyRunner returns a runner for fn; start it with Loop.
// It panics if maxInterval < minInterval, since both bounds cannot then hold.
func NewBoundedFrequencyRunner(name string, fn func() error, minInterval, retryInterval, maxInterval time.Duration) *BoundedFrequencyRunner {
	return newRunner(name, fn, minInterval, retryInterval, maxInterval, clock.RealClock{})
}

func newRunner(name string, fn func() error, minInterval, retryInterval, maxInterval time.Duration, clk clock.Clock) *BoundedFrequencyRunner {
	if maxInterval < minInterval {
		panic(fmt.Sprintf("%s: maxInterval (%v) must be >= minInterval (%v)", name, maxInterval, minInterval))
	}
	return &BoundedFrequencyRunner{
		name:          name,
		fn:            fn,
		minInterval:   minInterval,
		retryInterval: retryInterval,
		maxInterval:   maxInterval,
		clock:         clk,
		run:           make(chan struct{}, 1),
	}
}

// Run asks for a call as soon as the bounds allow. It never blocks. A request
// made before Loop starts is served when it starts; one made after Loop has
// stopped is never served (but, unlike upstream, does not panic).
func (r *BoundedFrequencyRunner) Run() {
	select {
	case r.run <- struct{}{}:
	default:
	}
}

// Loop serves requests and periodic calls until stop is closed. Run it in its
// own goroutine. The first call happens on the first Run() or after
// maxInterval, whichever comes first.
func (r *BoundedFrequencyRunner) Loop(stop <-chan struct{}) {
	logger := klog.Background().WithValues("runner", r.name)
	logger.V(3).Info("Loop running")
	defer logger.V(3).Info("Loop stopping")

	next := r.clock.NewTimer(r.maxInterval)
	defer next.Stop()

	for {
		select {
		case <-stop:
			return
		case <-next.C():
		case <-r.run:
		}
		// If both fired, drop the timer's tick: this call serves it.
		if !next.Stop() {
			select {
			case <-next.C():
			default:
			}
		}

		wait := r.maxInterval
		if err := r.call(); err != nil {
			wait = min(wait, r.retryInterval)
			logger.V(3).Info("Scheduling retry", "interval", wait, "err", err)
		}
		next.Reset(wait)

		if r.minInterval <= 0 {
			continue
		}
		cooldown := r.clock.NewTimer(r.minInterval)
		select {
		case <-stop:
			cooldown.Stop()
			return
		case <-cooldown.C():
		}
	}
}

// call runs fn, routing a panic through the apimachinery crash handlers
// (which log it and, by default, re-panic, as upstream does).
func (r *BoundedFrequencyRunner) call() error {
	defer utilruntime.HandleCrash()
	return r.fn()
}
