//go:build linux

package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseConfigs(t *testing.T) {
	for _, tc := range []struct {
		name               string
		modes, sizes, only string
		want               []config
		wantErr            bool
	}{
		{"cross product", "nftables,iptables", "1000, 10000", "", []config{{"nftables", 1000}, {"nftables", 10000}, {"iptables", 1000}, {"iptables", 10000}}, false},
		{"pairs override", "iptables", "5", "nftables:1000, iptables:2000", []config{{"nftables", 1000}, {"iptables", 2000}}, false},
		{"unknown mode", "ipvs", "1000", "", nil, true},
		{"zero services", "nftables", "0", "", nil, true},
		{"pair without size", "", "", "nftables", nil, true},
		{"pair with bad size", "", "", "nftables:10k", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfigs(tc.modes, tc.sizes, tc.only)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSideBySideTable(t *testing.T) {
	run := func(full, change float64) result {
		return result{FullSyncMs: full, ChangeMs: []float64{change, change + 10, change - 10}, AddMs: []float64{40}, NoopMs: []float64{0.05}, PeriodicMs: []float64{2, 4, 3}, PeriodicCPUMs: []float64{1.5},
			PeakRSSKiB:  50 * 1024,
			LiveHeapMiB: 20, KernelLoadMs: full / 2, KernelOneRuleMs: 20}
	}
	slowLoad := run(6600, 74)
	slowLoad.KernelLoadMs, slowLoad.KernelLoadTimedOut = 0, time.Minute
	slowLoad.KernelOneRuleMs = 0 // not measured (nftables, or no load)
	ours := map[int]*outcome{
		1000:  {runs: []result{run(600, 30), run(500, 20), run(700, 25)}},
		10000: {runs: []result{slowLoad}, failed: errors.New("boom")},
	}
	up := map[int]*outcome{
		1000:  {runs: []result{run(590, 70), run(12010, 75)}, timedOut: 8 * time.Minute},
		10000: {timedOut: 8 * time.Minute},
	}
	var b strings.Builder
	printSideBySide(&b, []config{{"nftables", 1000}, {"nftables", 10000}}, func(c config, u bool) *outcome {
		if u {
			return up[c.services]
		}
		return ours[c.services]
	})
	got := b.String()
	for _, want := range []string{
		// Medians over rounds: full 600 of 500/600/700; an even count averages.
		// Each cell ends with ours ÷ upstream.
		"| nftables 1000 | 3 / 2 | 600 ms / 6.30 s (0.10×) | 25 ms / 72 ms (0.34×) | 40 ms / 40 ms (1.00×) | 0.05 ms / 0.05 ms (1.00×) | 3.0 ms / 3.0 ms (1.00×) | 1.5 ms / 1.5 ms (1.00×) | 50 MiB / 50 MiB (1.00×) | 20 MiB / 20 MiB (1.00×) | 300 ms / 3.15 s (0.10×) | 20 ms / 20 ms (1.00×) | 2.00× / 2.00× (1.00×) |",
		// A load that did not finish: its time is a bound, the ratio an upper one.
		"| nftables 10000 | 1 / 0 | 6.60 s / did not finish in 8m0s | 74 ms / did not finish in 8m0s |",
		"| > 1m0s / did not finish in 8m0s | - / did not finish in 8m0s | < 0.11× / did not finish in 8m0s |",
		// Every round's kernel-only load and ratio, where the load finished.
		"- nftables 1000 upstream: full sync 590 ms, 12.0 s; kernel-only load 295 ms (2.00×), 6.00 s (2.00×); one-change 70 ms, 75 ms; then did not finish in 8m0s",
		"- nftables 10000 ours: full sync 6.60 s; one-change 74 ms; then failed",
		"- nftables 10000 upstream: did not finish in 8m0s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}
