package app

import (
	"context"
	"testing"
	"time"
)

// long is a bound no passing test comes near; only a broken ordering reaches it.
const long = time.Minute

func TestServiceLifecycleNotAService(t *testing.T) {
	var l *serviceLifecycle
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx, done := l.runContext(parent)
	if ctx != parent {
		t.Errorf("not a service: the run's context must be the parent")
	}
	done() // must neither block nor panic
}

// The SCM asks to stop: the run's context ends, the handler sees the run return, and
// the run's done waits until the handler has reported the stop.
func TestServiceLifecycleStopOrder(t *testing.T) {
	l := newServiceLifecycle(long)
	ctx, done := l.runContext(context.Background())

	var order []string
	handlerReported := make(chan struct{})
	go func() { // the handler's side
		l.requestStop()
		<-l.runDone()
		order = append(order, "handler saw the run return")
		l.stopReported()
		close(handlerReported)
	}()

	<-ctx.Done() // the run's side
	order = append(order, "run returned")
	done()
	select {
	case <-l.reported:
	default:
		t.Fatal("done returned before the handler reported the stop")
	}
	<-handlerReported
	order = append(order, "process may exit")

	want := []string{"run returned", "handler saw the run return", "process may exit"}
	if len(order) != len(want) {
		t.Fatalf("order %q, want %q", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %q, want %q", order, want)
		}
	}
}

// A run that fails on its own does not wait for a stop report that will never come.
func TestServiceLifecycleRunEndsOnItsOwn(t *testing.T) {
	l := newServiceLifecycle(long)
	ctx, done := l.runContext(context.Background())
	returned := make(chan struct{})
	go func() { done(); close(returned) }()
	select {
	case <-returned:
	case <-time.After(long):
		t.Fatal("done blocked without a stop request")
	}
	if ctx.Err() == nil {
		t.Error("the run's context must end with the run")
	}
	select {
	case <-l.runDone():
	default:
		t.Error("the handler is not told the run returned")
	}
}

// A handler that never reports does not keep the process forever, and repeated
// stop requests (Stop, then Shutdown) are harmless.
func TestServiceLifecycleBounded(t *testing.T) {
	l := newServiceLifecycle(time.Millisecond)
	ctx, done := l.runContext(context.Background())
	l.requestStop()
	l.requestStop()
	<-ctx.Done()
	done()
	done()
	l.stopReported()
	l.stopReported()
}
