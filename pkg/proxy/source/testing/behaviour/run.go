package behaviour

import (
	"slices"
	"testing"
)

// Evaluate answers what the proxier under test, synced with a Scenario's
// objects, does with a packet. An error (the evaluator cannot read the
// proxier's state, or the state is one the table's terms cannot describe)
// fails the scenario.
type Evaluate func(p Packet) (Outcome, error)

// Setup builds proxier p's test proxier over its fakes, feeds it sc's
// objects (and sc.NodeLabels, when set), syncs it, and returns its
// evaluator.
type Setup func(t *testing.T, sc Scenario) Evaluate

// Run runs the whole table for family a (other is the other family) through
// proxier p: one subtest per scenario, one error per check whose outcome
// differs. A check with a deviation for p is logged with its reason, so a
// run's verbose output lists every difference between the proxiers.
func Run(t *testing.T, p Proxier, a, other Addresses, setup Setup) {
	t.Helper()
	for _, sc := range Table(a, other) {
		t.Run(sc.Name, func(t *testing.T) {
			eval := setup(t, sc)
			for _, c := range sc.Checks {
				want, reason := c.WantFor(p)
				if reason != "" {
					t.Logf("%s: %s expects %s rather than %s: %s", c.Name, p, want, c.Want, reason)
				}
				got, err := eval(c.Packet)
				if err != nil {
					t.Fatalf("%s: %v", c.Name, err)
				}
				if !Same(got, want) {
					t.Errorf("%s: %s\n got: %s\nwant: %s", c.Name, c.Packet, got, want)
				}
			}
		})
	}
}

// Same reports whether two outcomes are the same behaviour: endpoint order
// does not matter, and masquerade and affinity only matter when the packet
// is DNATed.
func Same(a, b Outcome) bool {
	if a.Verdict != b.Verdict {
		return false
	}
	if a.Verdict != DNAT {
		return true
	}
	ea, eb := slices.Clone(a.Endpoints), slices.Clone(b.Endpoints)
	slices.Sort(ea)
	slices.Sort(eb)
	return slices.Equal(ea, eb) && a.Masquerade == b.Masquerade && a.Affinity == b.Affinity
}
