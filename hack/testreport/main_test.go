package main

import (
	"strings"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		events     []event
		wantLines  []string // each must appear in the output
		notLines   []string // none may appear
		wantFailed int
	}{{
		name: "passing package with a skip",
		events: []event{
			{Action: "start", Package: "k8s.io/a"},
			{Action: "run", Package: "k8s.io/a", Test: "TestX"},
			{Action: "output", Package: "k8s.io/a", Test: "TestX", Output: "noise\n"},
			{Action: "pass", Package: "k8s.io/a", Test: "TestX", Elapsed: 1},
			{Action: "skip", Package: "k8s.io/a", Test: "TestKernel"},
			{Action: "pass", Package: "k8s.io/a", Elapsed: 2.5},
		},
		wantLines: []string{"[1/3] ok   k8s.io/a 2.5s (1 skipped"},
		notLines:  []string{"noise", "FAIL"},
	}, {
		name: "failing subtest prints its output once",
		events: []event{
			{Action: "start", Package: "k8s.io/b"},
			{Action: "output", Package: "k8s.io/b", Test: "TestY/case", Output: "want 1, got 2\n"},
			{Action: "fail", Package: "k8s.io/b", Test: "TestY/case", Elapsed: 0.1},
			{Action: "fail", Package: "k8s.io/b", Test: "TestY", Elapsed: 0.1},
			{Action: "output", Package: "k8s.io/b", Output: "FAIL\n"},
			{Action: "fail", Package: "k8s.io/b", Elapsed: 3},
		},
		wantLines:  []string{"--- FAIL k8s.io/b.TestY/case", "    want 1, got 2", "[1/3] FAIL k8s.io/b 3.0s", "FAILED: "},
		wantFailed: 3,
	}, {
		name: "build failure names the package and the compiler's words",
		events: []event{
			{Action: "build-output", ImportPath: "k8s.io/c [k8s.io/c.test]", Output: "c.go:1: undefined: x\n"},
			{Action: "build-fail", ImportPath: "k8s.io/c [k8s.io/c.test]"},
		},
		wantLines:  []string{"FAIL k8s.io/c [k8s.io/c.test] [build failed]", "c.go:1: undefined: x"},
		wantFailed: 1,
	}, {
		name: "slow test listed",
		events: []event{
			{Action: "pass", Package: "k8s.io/d", Test: "TestScale", Elapsed: 95},
			{Action: "pass", Package: "k8s.io/d", Test: "TestScale/10k", Elapsed: 90},
			{Action: "pass", Package: "k8s.io/d", Elapsed: 96},
		},
		wantLines: []string{"slow test: k8s.io/d.TestScale 95s", "slowest: d 96s"},
		notLines:  []string{"TestScale/10k"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			r := newReport(&out, 3, t0)
			for _, e := range tc.events {
				r.handle(e, t0)
			}
			r.summary(t0.Add(time.Minute))
			for _, w := range tc.wantLines {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, n := range tc.notLines {
				if strings.Contains(out.String(), n) {
					t.Errorf("output has %q:\n%s", n, out.String())
				}
			}
			if len(r.failed) != tc.wantFailed {
				t.Errorf("failed = %v, want %d entries", r.failed, tc.wantFailed)
			}
		})
	}
}

func TestHeartbeatNamesRunningPackages(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	var out strings.Builder
	r := newReport(&out, 0, t0)
	r.heartbeat(t0.Add(time.Minute))
	r.handle(event{Action: "start", Package: "k8s.io/slow"}, t0.Add(time.Minute))
	r.heartbeat(t0.Add(3 * time.Minute))
	for _, w := range []string{"1m0s elapsed, 0 packages done; compiling", "running k8s.io/slow (2m0s)"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("heartbeat lacks %q:\n%s", w, out.String())
		}
	}
}
