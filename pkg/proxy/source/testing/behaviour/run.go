package behaviour

import (
	"fmt"
	"net/netip"
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
	var err error
	if a, err = a.withSourceRanges(); err != nil {
		t.Fatal(err)
	}
	if other, err = other.withSourceRanges(); err != nil {
		t.Fatal(err)
	}
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

// withSourceRanges fills in AllowedRange and DeniedClient when they are empty:
// the /24 (IPv4) or /64 (IPv6) holding External, and a documentation-range
// client outside it. Either way it checks what the table relies on: the range
// holds External and neither the node nor DeniedClient.
func (a Addresses) withSourceRanges() (Addresses, error) {
	external, err := netip.ParseAddr(a.External)
	if err != nil {
		return a, fmt.Errorf("behaviour: Addresses.External %q: %w", a.External, err)
	}
	if a.AllowedRange == "" {
		bits := 24
		if external.Is6() {
			bits = 64
		}
		prefix, _ := external.Prefix(bits)
		a.AllowedRange = prefix.String()
	}
	if a.DeniedClient == "" {
		a.DeniedClient = "198.18.0.9"
		if external.Is6() {
			a.DeniedClient = "2001:db8:1::9"
		}
	}
	allowed, err := netip.ParsePrefix(a.AllowedRange)
	if err != nil {
		return a, fmt.Errorf("behaviour: Addresses.AllowedRange %q: %w", a.AllowedRange, err)
	}
	for _, c := range []struct {
		field, addr string
		inside      bool
	}{{"External", a.External, true}, {"Node", a.Node, false}, {"DeniedClient", a.DeniedClient, false}} {
		addr, err := netip.ParseAddr(c.addr)
		if err != nil {
			return a, fmt.Errorf("behaviour: Addresses.%s %q: %w", c.field, c.addr, err)
		}
		if allowed.Contains(addr) != c.inside {
			return a, fmt.Errorf("behaviour: Addresses.%s %s must be %s AllowedRange %s", c.field, c.addr,
				map[bool]string{true: "inside", false: "outside"}[c.inside], allowed)
		}
	}
	return a, nil
}
