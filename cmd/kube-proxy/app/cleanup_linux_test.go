package app

import (
	"context"
	"strings"
	"testing"
)

// TestRunCleanups: a cleanup that fails because another mode's rules still referenced
// its chains (iptables before ipvs, after ipvs mode) gets a second pass once the others
// ran; only one that fails again fails --cleanup.
func TestRunCleanups(t *testing.T) {
	order := []string{"iptables", "ipvs", "nftables"}
	tests := []struct {
		name      string
		failures  map[string]int // how many calls of each fail before it succeeds
		absent    []string
		wantCalls map[string]int
		wantErr   string
	}{{
		name:      "all succeed at once",
		wantCalls: map[string]int{"iptables": 1, "ipvs": 1, "nftables": 1},
	}, {
		name:      "iptables blocked by ipvs chains until ipvs cleaned",
		failures:  map[string]int{"iptables": 1},
		wantCalls: map[string]int{"iptables": 2, "ipvs": 1, "nftables": 1},
	}, {
		name:      "a cleanup that keeps failing fails the whole",
		failures:  map[string]int{"ipvs": 5},
		wantCalls: map[string]int{"iptables": 1, "ipvs": 2, "nftables": 1},
		wantErr:   "ipvs",
	}, {
		name:      "modes not asked for are not run",
		absent:    []string{"nftables"},
		failures:  map[string]int{"iptables": 1},
		wantCalls: map[string]int{"iptables": 2, "ipvs": 1},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := map[string]int{}
			cleanups := map[string]func(context.Context) bool{}
			for _, name := range order {
				cleanups[name] = func(context.Context) bool {
					calls[name]++
					return calls[name] <= tc.failures[name]
				}
			}
			for _, name := range tc.absent {
				delete(cleanups, name)
			}
			err := runCleanups(context.Background(), order, cleanups)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("err = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("err = %v, want one naming %q", err, tc.wantErr)
			}
			for _, name := range order {
				if calls[name] != tc.wantCalls[name] {
					t.Errorf("%s cleanup ran %d times, want %d", name, calls[name], tc.wantCalls[name])
				}
			}
		})
	}
}
