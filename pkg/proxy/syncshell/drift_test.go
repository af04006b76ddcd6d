package syncshell

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
)

// drifter is a backend whose kernel state drifts on demand.
type drifter struct {
	recorder
	drifts []Drift
	err    error
	asked  int
	// during, when set, runs in the middle of the check (a change
	// arriving while the kernel is read).
	during func()
}

func (d *drifter) Drift(ctx context.Context) ([]Drift, error) {
	d.asked++
	if d.during != nil {
		d.during()
		// A backend gives up between its reads once ctx is cancelled.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return d.drifts, d.err
}

// The drift check runs at every due check, even right after a write (a
// partial sync does not repair what drifted elsewhere), and any drift or a
// failed read turns the sync full; no drift leaves it partial. The
// RulesChecker question is not asked of a DriftChecker.
func TestDriftCheck(t *testing.T) {
	chain := Drift{Kind: "chain", Object: "ip kube-proxy services", Expected: "12 rules", Found: "0 rules"}
	for _, tc := range []struct {
		name     string
		drifts   []Drift
		err      error
		due      bool
		wantAsk  int
		wantFull bool
	}{
		{"not due", []Drift{chain}, nil, false, 0, false},
		{"due, nothing drifted", nil, nil, true, 1, false},
		{"due, a chain flushed", []Drift{chain}, nil, true, 1, true},
		{"due, kernel unreadable", nil, errors.New("netlink: permission denied"), true, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &drifter{recorder: recorder{out: Outcome{Programmed: true}, missing: true}, drifts: tc.drifts, err: tc.err}
			s := newShell(t, b, func(o *Options) { o.CheckInterval = time.Minute })
			initialize(s)
			syncNow(t, s)
			s.checkDue.Store(tc.due)
			syncNow(t, s)
			if b.asked != tc.wantAsk || b.last(t).full != tc.wantFull {
				t.Fatalf("asked=%d full=%v, want asked=%d full=%v", b.asked, b.last(t).full, tc.wantAsk, tc.wantFull)
			}
			if b.checks != 0 {
				t.Fatal("RulesMissing asked of a DriftChecker")
			}
		})
	}
}

// Each repaired drift is counted under its kind.
func TestDriftCounted(t *testing.T) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeIPTables)
	b := &drifter{drifts: []Drift{
		{Kind: "set element", Object: "a"}, {Kind: "set element", Object: "b"}, {Kind: "chain", Object: "c"},
	}}
	s := newShell(t, b, func(o *Options) { o.CheckInterval = time.Minute })
	initialize(s)
	syncNow(t, s)
	counter := metrics.SyncProxyRulesDriftRepairsTotal.WithLabelValues("IPv4", "set element")
	before, _ := testutil.GetCounterMetricValue(counter)
	s.RequestRulesCheck()
	syncNow(t, s)
	after, _ := testutil.GetCounterMetricValue(counter)
	if after-before != 2 {
		t.Fatalf("set element repairs counted %v, want 2", after-before)
	}
}

// A writer that undoes the same object at every check makes it contested
// after contestedRepairs repairs: its repair then waits for a doubling
// backoff, while drift of another object is still repaired at once. An
// object left alone for a whole window is forgotten.
func TestDriftTrackerContested(t *testing.T) {
	const check = 30 * time.Second
	tr := newDriftTracker(check, time.Hour)
	fought := Drift{Kind: "chain", Object: "KUBE-SERVICES"}
	other := Drift{Kind: "set element", Object: "KUBE-CLUSTER-IP 10.0.0.1"}
	now := time.Unix(1e9, 0)

	var repairedAt []int
	for i := range 40 {
		repair, _ := tr.decide(now, []Drift{fought})
		if len(repair) == 1 {
			repairedAt = append(repairedAt, i)
		}
		now = now.Add(check)
	}
	// Checks 0,1,2 repair (the third makes it contested, backoff 2 checks),
	// then 4 (backoff 4), 8 (8), 16 (16), 32.
	want := []int{0, 1, 2, 4, 8, 16, 32}
	if !slices.Equal(repairedAt, want) {
		t.Fatalf("fought object repaired at checks %v, want %v", repairedAt, want)
	}
	if tr.contested() != 1 {
		t.Fatalf("contested = %d, want 1", tr.contested())
	}

	repair, _ := tr.decide(now, []Drift{fought, other})
	if len(repair) != 1 || repair[0] != other {
		t.Fatalf("repair = %v, want only the uncontested %v", repair, other)
	}

	// Nothing drifts for longer than the window: both are forgotten, and a
	// later one-off change of the once-fought object is repaired at once.
	now = now.Add(contestedWindowChecks*check + check)
	if repair, _ := tr.decide(now, nil); len(repair) != 0 || tr.contested() != 0 || len(tr.objects) != 0 {
		t.Fatalf("after a quiet window: repair=%v contested=%d objects=%d, want all forgotten", repair, tr.contested(), len(tr.objects))
	}
	if repair, _ := tr.decide(now, []Drift{fought}); len(repair) != 1 {
		t.Fatal("a one-off change after a quiet window was not repaired at once")
	}
}

// The shell's sync stays partial while only contested objects drift and
// their backoff runs.
func TestDriftContestedNoFullSync(t *testing.T) {
	b := &drifter{drifts: []Drift{{Kind: "chain", Object: "KUBE-SERVICES"}}}
	s := newShell(t, b, func(o *Options) { o.CheckInterval = time.Minute; o.FullSyncInterval = time.Hour })
	now := time.Now()
	s.now = func() time.Time { return now }
	initialize(s)
	syncNow(t, s)
	var full []bool
	for range 5 {
		now = now.Add(time.Minute)
		s.RequestRulesCheck()
		syncNow(t, s)
		full = append(full, b.last(t).full)
	}
	want := []bool{true, true, true, false, true}
	for i := range want {
		if full[i] != want[i] {
			t.Fatalf("full syncs per check = %v, want %v", full, want)
		}
	}
}

// A change never waits for a whole drift check: one queued when the check
// falls due is programmed first, one arriving during the check cancels it,
// and the check then runs on the next sync, which does not give way again,
// so churn cannot postpone a repair past one more sync. A forced check
// (RequestRulesCheck) never gives way.
func TestDriftCheckGivesWayToChanges(t *testing.T) {
	chain := Drift{Kind: "chain", Object: "ip kube-proxy services"}
	for _, tc := range []struct {
		name string
		// queued adds a Service before the due sync; during adds one in
		// the middle of its check.
		queued, during, forced bool
		// want, per sync from the due one on: was the backend asked, was
		// the sync full, was the check due again after it.
		wantAsked []int
		wantFull  []bool
	}{
		{name: "no change", wantAsked: []int{1}, wantFull: []bool{true}},
		{name: "change queued", queued: true, wantAsked: []int{0, 1}, wantFull: []bool{false, true}},
		{name: "change during the check", during: true, wantAsked: []int{1, 2}, wantFull: []bool{false, true}},
		{name: "change queued, then another during the next check", queued: true, during: true, wantAsked: []int{0, 1}, wantFull: []bool{false, true}},
		{name: "forced, change queued", queued: true, forced: true, wantAsked: []int{1}, wantFull: []bool{true}},
		{name: "forced, change during", during: true, forced: true, wantAsked: []int{1}, wantFull: []bool{true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &drifter{drifts: []Drift{chain}}
			s := newShell(t, b, func(o *Options) { o.CheckInterval = time.Minute })
			initialize(s)
			syncNow(t, s)
			n := 0
			add := func() {
				n++
				s.OnServiceAdd(service(fmt.Sprintf("svc-%d", n), fmt.Sprintf("10.0.0.%d", n), nil))
			}
			if tc.during {
				b.during = add
			}
			if tc.queued {
				add()
			}
			if tc.forced {
				s.RequestRulesCheck()
			} else {
				s.checkDue.Store(true)
			}
			for i := range tc.wantAsked {
				syncNow(t, s)
				if b.asked != tc.wantAsked[i] || b.last(t).full != tc.wantFull[i] {
					t.Fatalf("sync %d: asked=%d full=%v, want asked=%d full=%v", i, b.asked, b.last(t).full, tc.wantAsked[i], tc.wantFull[i])
				}
				// Every change made so far was programmed by this sync.
				if svcs, _ := s.Snapshot(); len(svcs) != n {
					t.Fatalf("sync %d: %d service ports programmed, want %d", i, len(svcs), n)
				}
				wantDue := i+1 < len(tc.wantAsked)
				if s.checkDue.Load() != wantDue {
					t.Fatalf("sync %d: check due again = %v, want %v", i, s.checkDue.Load(), wantDue)
				}
			}
		})
	}
}
