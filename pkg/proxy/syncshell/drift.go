package syncshell

import (
	"context"
	"time"

	"k8s.io/kube-proxy/pkg/proxy/metrics"
)

// Drift is one difference between what a backend programmed and what the
// kernel (or HNS) holds now: something another program, or an operator,
// changed behind kube-proxy's back.
type Drift struct {
	// Kind says what differed ("chain", "set element", "real server", ...).
	// It labels the repair metric, so each backend draws it from a small
	// fixed set; the object goes in Object.
	Kind string
	// Object names what differed: a chain, a set and its element, a virtual
	// server.
	Object string
	// Expected and Found say what kube-proxy programmed and what the kernel
	// holds ("" for absent).
	Expected, Found string
}

// DriftChecker is implemented by backends that can compare everything they
// programmed with what the kernel holds. When Options.CheckInterval is set
// the Shell asks once per interval, however recently the backend wrote, so
// an outside change is repaired within one interval even while Services
// keep changing; any drift turns that sync into a full one. The comparison
// must be cheap when nothing drifted (a generation number the kernel keeps,
// or one read compared with the backend's own view of what it wrote). A
// backend implementing DriftChecker is not asked RulesChecker's question.
type DriftChecker interface {
	// Drift returns what differs; nothing when nothing does. An error means
	// the kernel's state could not be read, and the Shell rewrites
	// everything as it does for a drift.
	Drift(ctx context.Context) ([]Drift, error)
}

// Anti-flap: when another writer keeps undoing what kube-proxy programmed
// (a second proxy, a firewall manager fighting over a chain), repairing the
// same object at every check turns both into a loop that rewrites the
// kernel every interval and fills the log. An object repaired
// contestedRepairs times within contestedWindowChecks check intervals is
// "contested": that is logged as an error once, counted in a gauge, and the
// object is then repaired only after a backoff that doubles up to the full
// sync interval. Drift of any uncontested object is still repaired at once.
const (
	contestedRepairs      = 3
	contestedWindowChecks = 10
	maxDriftLogLines      = 20
)

type driftRecord struct {
	repairs    []time.Time
	contested  bool
	backoff    time.Duration
	nextRepair time.Time
}

// driftTracker remembers recent repairs per object to tell a one-off
// outside change from a writer that keeps undoing ours.
type driftTracker struct {
	window     time.Duration
	minBackoff time.Duration
	maxBackoff time.Duration
	objects    map[string]*driftRecord
}

func newDriftTracker(checkInterval, fullSyncInterval time.Duration) *driftTracker {
	maxBackoff := fullSyncInterval
	if maxBackoff <= 0 {
		maxBackoff = time.Hour
	}
	return &driftTracker{
		window:     contestedWindowChecks * checkInterval,
		minBackoff: 2 * checkInterval,
		maxBackoff: max(maxBackoff, 2*checkInterval),
		objects:    map[string]*driftRecord{},
	}
}

// decide returns the drifts to repair now (possibly none, when every one
// is contested and backing off) and those that became contested with this
// check.
func (t *driftTracker) decide(now time.Time, drifts []Drift) (repair, newlyContested []Drift) {
	seen := make(map[string]bool, len(drifts))
	for _, d := range drifts {
		key := d.Kind + "\x00" + d.Object
		if seen[key] {
			continue
		}
		seen[key] = true
		rec := t.objects[key]
		if rec == nil {
			rec = &driftRecord{}
			t.objects[key] = rec
		}
		rec.prune(now, t.window)
		if rec.contested && now.Before(rec.nextRepair) {
			continue
		}
		repair = append(repair, d)
		rec.repairs = append(rec.repairs, now)
		if !rec.contested && len(rec.repairs) >= contestedRepairs {
			rec.contested = true
			rec.backoff = t.minBackoff
			newlyContested = append(newlyContested, d)
		}
		if rec.contested {
			rec.nextRepair = now.Add(rec.backoff)
			rec.backoff = min(2*rec.backoff, t.maxBackoff)
		}
	}
	// An object that stayed put for a whole window is no longer fought
	// over: forget it, so that a later one-off change is repaired at once.
	for key, rec := range t.objects {
		if seen[key] {
			continue
		}
		rec.prune(now, t.window)
		if len(rec.repairs) == 0 {
			delete(t.objects, key)
		}
	}
	return repair, newlyContested
}

func (r *driftRecord) prune(now time.Time, window time.Duration) {
	i := 0
	for i < len(r.repairs) && now.Sub(r.repairs[i]) > window {
		i++
	}
	r.repairs = r.repairs[i:]
}

// contested counts the objects currently backing off.
func (t *driftTracker) contested() int {
	n := 0
	for _, rec := range t.objects {
		if rec.contested {
			n++
		}
	}
	return n
}

// driftBeforeSync runs a due drift check unless it should give way to a
// change: it reports whether this sync must be full, and whether the check
// yielded and must run again on the next sync.
//
// A change never waits for a whole check. The check reads all of the
// kernel's state, and where that is slow (a TCG guest took 2-8 s for ipvs's
// execs of ipset and iptables-save, longer than its 2 s sync period) a
// change queued behind it waited as long. So a change queued when the check
// falls due is programmed first, and one arriving during the check cancels
// it between the backend's reads. Either way the check runs on the very
// next sync, and that one does not yield: under constant churn a drift is
// still found within one sync period plus one sync.
func (s *Shell) driftBeforeSync(ctx context.Context, now time.Time, forced, changeQueued bool) (full, yielded bool) {
	mayYield := !forced && !s.checkYielded
	if mayYield && changeQueued {
		s.checkYielded = true
		s.logger.V(4).Info("Programming queued changes before the drift check")
		return false, true
	}
	checkCtx := ctx
	if mayYield {
		var cancel context.CancelFunc
		checkCtx, cancel = context.WithCancel(ctx)
		s.yieldCheck.Store(&cancel)
		defer func() {
			s.yieldCheck.Store(nil)
			cancel()
		}()
	}
	full, cancelled := s.checkDrift(checkCtx, now)
	if cancelled && ctx.Err() == nil {
		s.checkYielded = true
		s.logger.V(4).Info("Drift check gave way to a change")
		return false, true
	}
	s.checkYielded = false
	return full, false
}

// checkDrift asks the backend what drifted and reports whether this sync
// must be full to repair it. It logs each repaired difference once and
// counts it by kind. cancelled says ctx ended the check before it could
// tell; nothing was decided then.
func (s *Shell) checkDrift(ctx context.Context, now time.Time) (full, cancelled bool) {
	family := string(s.opts.Family)
	drifts, err := s.drifter.Drift(ctx)
	if err != nil && ctx.Err() != nil {
		return false, true
	}
	if err != nil {
		s.logger.Error(err, "Could not compare the programmed rules with the kernel's; rewriting them with a full sync")
		return true, false
	}
	repair, contested := s.drift.decide(now, drifts)
	metrics.SyncProxyRulesDriftContested.WithLabelValues(family).Set(float64(s.drift.contested()))
	for _, d := range contested {
		s.logger.Error(nil, "Another writer keeps undoing kube-proxy's rules; repairing this object with a growing backoff instead of at every check",
			"kind", d.Kind, "object", d.Object, "expected", d.Expected, "found", d.Found,
			"repairs", contestedRepairs, "within", s.drift.window)
	}
	if len(repair) == 0 {
		if len(drifts) > 0 {
			s.logger.V(2).Info("Only contested objects drifted; their repair is backing off", "drifts", len(drifts))
		}
		return false, false
	}
	unlogged := map[string]int{}
	for i, d := range repair {
		metrics.SyncProxyRulesDriftRepairsTotal.WithLabelValues(family, d.Kind).Inc()
		if i < maxDriftLogLines {
			s.logger.Info("Repairing rules changed behind kube-proxy's back",
				"kind", d.Kind, "object", d.Object, "expected", d.Expected, "found", d.Found)
		} else {
			unlogged[d.Kind]++
		}
	}
	if len(unlogged) > 0 {
		s.logger.Info("More rules changed behind kube-proxy's back", "countByKind", unlogged)
	}
	return true, false
}
