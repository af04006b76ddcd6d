package runner

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// step is one action of a scripted scenario followed by a check of how many
// times the work function has been called in total.
type step struct {
	run       int           // number of Run() calls
	advance   time.Duration // fake clock step
	stop      bool          // close the stop channel
	wantCalls int
}

type recorder struct {
	mu    sync.Mutex
	calls int
	fail  map[int]bool // 1-based call numbers that return an error
}

func (r *recorder) fn() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.fail[r.calls] {
		return errors.New("sync failed")
	}
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func TestBoundedFrequencyRunner(t *testing.T) {
	const (
		minI   = 1 * time.Second
		retryI = 5 * time.Second
		maxI   = 10 * time.Second
		ms     = time.Millisecond
	)
	tests := []struct {
		name            string
		min, retry, max time.Duration
		fail            map[int]bool
		runBeforeLoop   bool
		steps           []step
	}{
		{
			name: "first call waits for Run",
			steps: []step{
				{wantCalls: 0},
				{advance: 5 * time.Second, wantCalls: 0},
				{run: 1, wantCalls: 1},
			},
		},
		{
			name:          "Run before Loop is served at start",
			runBeforeLoop: true,
			steps:         []step{{wantCalls: 1}},
		},
		{
			name: "min interval defers and coalesces requests",
			steps: []step{
				{run: 1, wantCalls: 1},
				{run: 3, wantCalls: 1},
				{advance: minI - ms, wantCalls: 1},
				{advance: ms, wantCalls: 2},
				{advance: minI, wantCalls: 2},
			},
		},
		{
			name: "request after min interval runs at once",
			steps: []step{
				{run: 1, wantCalls: 1},
				{advance: 2 * minI, wantCalls: 1},
				{run: 1, wantCalls: 2},
			},
		},
		{
			name: "max interval forces periodic calls",
			steps: []step{
				{advance: maxI - ms, wantCalls: 0},
				{advance: ms, wantCalls: 1},
				{advance: maxI - ms, wantCalls: 1},
				{advance: ms, wantCalls: 2},
			},
		},
		{
			name: "max interval counts from the last call",
			steps: []step{
				{advance: 3 * time.Second, wantCalls: 0},
				{run: 1, wantCalls: 1},
				{advance: maxI - ms, wantCalls: 1},
				{advance: ms, wantCalls: 2},
			},
		},
		{
			name: "retry after error",
			fail: map[int]bool{1: true},
			steps: []step{
				{run: 1, wantCalls: 1},
				{advance: retryI - ms, wantCalls: 1},
				{advance: ms, wantCalls: 2},
				// success: back to the max interval
				{advance: retryI, wantCalls: 2},
				{advance: maxI - retryI - ms, wantCalls: 2},
				{advance: ms, wantCalls: 3},
			},
		},
		{
			name: "repeated errors keep retrying",
			fail: map[int]bool{1: true, 2: true, 3: true},
			steps: []step{
				{run: 1, wantCalls: 1},
				{advance: retryI, wantCalls: 2},
				{advance: retryI, wantCalls: 3},
				{advance: retryI, wantCalls: 4},
				{advance: retryI, wantCalls: 4},
			},
		},
		{
			name: "Run during retry wait runs early",
			fail: map[int]bool{1: true},
			steps: []step{
				{run: 1, wantCalls: 1},
				{advance: 2 * time.Second, wantCalls: 1},
				{run: 1, wantCalls: 2},
				{advance: retryI, wantCalls: 2},
			},
		},
		{
			name: "retry longer than max is capped by max",
			min:  minI, retry: 20 * time.Second, max: maxI,
			fail: map[int]bool{1: true},
			steps: []step{
				{run: 1, wantCalls: 1},
				{advance: maxI - ms, wantCalls: 1},
				{advance: ms, wantCalls: 2},
			},
		},
		{
			name: "retry shorter than min still waits for min",
			min:  3 * time.Second, retry: time.Second, max: maxI,
			fail: map[int]bool{1: true},
			steps: []step{
				{run: 1, wantCalls: 1},
				{advance: time.Second, wantCalls: 1},
				{advance: 2*time.Second - ms, wantCalls: 1},
				{advance: ms, wantCalls: 2},
			},
		},
		{
			name: "zero min interval runs every request",
			min:  0, retry: retryI, max: maxI,
			steps: []step{
				{run: 1, wantCalls: 1},
				{run: 1, wantCalls: 2},
				{run: 1, wantCalls: 3},
			},
		},
		{
			name: "stop while idle",
			steps: []step{
				{run: 1, wantCalls: 1},
				{advance: minI, wantCalls: 1},
				{stop: true, wantCalls: 1},
				{run: 1, wantCalls: 1},
				{advance: 10 * maxI, wantCalls: 1},
			},
		},
		{
			name: "stop during cooldown",
			steps: []step{
				{run: 1, wantCalls: 1},
				{run: 1, wantCalls: 1},
				{stop: true, wantCalls: 1},
				{advance: 10 * maxI, wantCalls: 1},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			minInterval, retryInterval, maxInterval := tc.min, tc.retry, tc.max
			if maxInterval == 0 {
				minInterval, retryInterval, maxInterval = minI, retryI, maxI
			}
			synctest.Test(t, func(t *testing.T) {
				fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				rec := &recorder{fail: tc.fail}
				r := newRunner("test", rec.fn, minInterval, retryInterval, maxInterval, fc)
				if tc.runBeforeLoop {
					r.Run()
				}
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					r.Loop(stop)
				}()
				stopped := false
				for i, s := range tc.steps {
					synctest.Wait()
					for range s.run {
						r.Run()
					}
					if s.stop {
						close(stop)
						stopped = true
						synctest.Wait()
						select {
						case <-done:
						default:
							t.Fatalf("step %d: Loop did not return after stop", i)
						}
					}
					if s.advance > 0 {
						fc.Step(s.advance)
					}
					synctest.Wait()
					if got := rec.count(); got != s.wantCalls {
						t.Fatalf("step %d (%+v): %d calls, want %d", i, s, got, s.wantCalls)
					}
				}
				if !stopped {
					close(stop)
				}
				<-done
			})
		})
	}
}

func TestRealClock(t *testing.T) {
	// Inside a synctest bubble the real clock is virtual, so this checks the
	// exported constructor's wiring to time without waiting.
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			times []time.Time
		)
		start := time.Now()
		r := NewBoundedFrequencyRunner("real", func() error {
			mu.Lock()
			defer mu.Unlock()
			times = append(times, time.Now())
			return nil
		}, time.Second, time.Second, time.Hour)
		stop := make(chan struct{})
		go r.Loop(stop)
		r.Run()
		synctest.Wait() // first call done, now cooling down
		r.Run()
		time.Sleep(2*time.Hour + time.Minute)
		close(stop)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		want := []time.Duration{0, time.Second, time.Hour + time.Second, 2*time.Hour + time.Second}
		if len(times) != len(want) {
			t.Fatalf("got %d calls at %v, want %d", len(times), times, len(want))
		}
		for i, w := range want {
			if got := times[i].Sub(start); got != w {
				t.Errorf("call %d at +%v, want +%v", i, got, w)
			}
		}
	})
}

func TestConstructorBounds(t *testing.T) {
	tests := []struct {
		name      string
		min, max  time.Duration
		wantPanic bool
	}{
		{"max below min", 2 * time.Second, time.Second, true},
		{"equal", time.Second, time.Second, false},
		{"zero", 0, 0, false},
		{"normal", time.Second, time.Hour, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if p := recover(); (p != nil) != tc.wantPanic {
					t.Errorf("panic = %v, wantPanic %v", p, tc.wantPanic)
				}
			}()
			NewBoundedFrequencyRunner("x", func() error { return nil }, tc.min, time.Second, tc.max)
		})
	}
}
