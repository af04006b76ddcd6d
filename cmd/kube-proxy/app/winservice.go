package app

// Sequencing a Windows service's stop with the end of the proxy's run. The handler that
// talks to the service control manager (SCM) is in service_windows.go; this part has
// no Windows dependency so that it is tested on every platform.

import (
	"context"
	"sync"
	"time"
)

// serviceStopGrace bounds how long a stopping service waits for the run to return,
// and the run for the SCM to be told. Leaving the rules in place makes the run's own
// return quick, so the bound only matters if something hangs.
const serviceStopGrace = 10 * time.Second

// runningService is set by initForOS when kube-proxy runs as a Windows service, and is
// nil otherwise. It is global because the SCM dispatches a process's service controls
// to a single handler: there is at most one service per process.
var runningService *serviceLifecycle

// serviceLifecycle orders a stop asked by the SCM: the request cancels the run's
// context; the handler reports the service stopped only once the run has returned;
// the process exits only once that report is made. The SCM thus sees neither a crash
// (a process gone before it reported stopped) nor a stopped service whose process is
// still programming HNS while its replacement starts.
type serviceLifecycle struct {
	grace time.Duration

	stopRequested chan struct{}
	runReturned   chan struct{}
	reported      chan struct{}

	stopOnce, runOnce, reportOnce sync.Once
}

func newServiceLifecycle(grace time.Duration) *serviceLifecycle {
	return &serviceLifecycle{
		grace:         grace,
		stopRequested: make(chan struct{}),
		runReturned:   make(chan struct{}),
		reported:      make(chan struct{}),
	}
}

// requestStop is the handler's reaction to the SCM's Stop or Shutdown.
func (l *serviceLifecycle) requestStop() {
	l.stopOnce.Do(func() { close(l.stopRequested) })
}

// runDone is closed when the run has returned, for the handler to wait on (at most
// l.grace) before it reports the service stopped.
func (l *serviceLifecycle) runDone() <-chan struct{} { return l.runReturned }

// stopReported is called once the SCM has been told the service stopped (or the
// handler gave up talking to it).
func (l *serviceLifecycle) stopReported() {
	l.reportOnce.Do(func() { close(l.reported) })
}

// runContext returns parent, cancelled when the SCM asks to stop, and done, for the
// run to call when it returns. After a stop request, done waits (at most l.grace) for
// the SCM to be told before the process may exit. A run that ends on its own (an
// error) does not wait: the process exits without reporting, and the SCM treats that
// as the failure it is (its recovery actions apply). On a nil receiver (not a
// service) the context is parent's and done does nothing.
func (l *serviceLifecycle) runContext(parent context.Context) (context.Context, func()) {
	if l == nil {
		return parent, func() {}
	}
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-l.stopRequested:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		l.runOnce.Do(func() { close(l.runReturned) })
		select {
		case <-l.stopRequested:
		default:
			return
		}
		select {
		case <-l.reported:
		case <-time.After(l.grace):
		}
	}
}
