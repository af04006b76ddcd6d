//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

type config struct {
	mode     string
	services int
}

// parseConfigs returns the configurations to run: the pairs of only when set
// ("nftables:10000,iptables:1000"), else every mode with every size.
func parseConfigs(modes, sizes, only string) ([]config, error) {
	var cfgs []config
	if only != "" {
		for _, p := range strings.Split(only, ",") {
			m, n, ok := strings.Cut(strings.TrimSpace(p), ":")
			if !ok {
				return nil, fmt.Errorf("config %q: want mode:services", p)
			}
			c, err := parseConfigs(m, n, "")
			if err != nil {
				return nil, fmt.Errorf("config %q: %w", p, err)
			}
			cfgs = append(cfgs, c...)
		}
		return cfgs, nil
	}
	for _, m := range strings.Split(modes, ",") {
		m = strings.TrimSpace(m)
		if m != "iptables" && m != "iptables-legacy" && m != "nftables" {
			return nil, fmt.Errorf("mode %q: want iptables, iptables-legacy or nftables", m)
		}
		for _, s := range strings.Split(sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("Service count %q: want a positive integer", s)
			}
			cfgs = append(cfgs, config{m, n})
		}
	}
	return cfgs, nil
}

// outcome is one implementation's rounds of one configuration.
type outcome struct {
	runs     []result
	timedOut time.Duration // set when any round did not finish
	failed   error
}

// sideBySide runs every configuration rounds times, ours and upstream's worker
// back to back, the order alternating between rounds so that neither side
// always runs right after the other's heavy kernel work. A side that times out
// or fails in a round is not run again for that configuration: the later
// rounds would only cost the same timeout.
func sideBySide(w io.Writer, ours, upstream string, cfgs []config, rounds, eps, changes int, timeout time.Duration) error {
	type key struct {
		config
		upstream bool
	}
	out := map[key]*outcome{}
	for _, c := range cfgs {
		out[key{c, false}] = &outcome{}
		out[key{c, true}] = &outcome{}
	}
	for round := range rounds {
		for _, c := range cfgs {
			order := []bool{false, true}
			if round%2 == 1 {
				order = []bool{true, false}
			}
			for _, up := range order {
				o := out[key{c, up}]
				if o.timedOut > 0 || o.failed != nil {
					continue
				}
				exe, name := ours, "ours"
				if up {
					exe, name = upstream, "upstream"
				}
				start := time.Now()
				r, err := runChild(exe, c.mode, c.services, eps, changes, timeout)
				switch {
				case errors.Is(err, errTimeout):
					o.timedOut = timeout
				case err != nil:
					o.failed = err
				default:
					o.runs = append(o.runs, r)
				}
				// The load average, because these are wall times on a machine
				// other jobs may share.
				load, _ := os.ReadFile("/proc/loadavg")
				fmt.Fprintf(os.Stderr, "round %d %s %d %s: %s (%v, load %s)\n", round+1, c.mode, c.services, name, summary(r, err),
					time.Since(start).Round(time.Second), strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
			}
		}
	}
	printSideBySide(w, cfgs, func(c config, up bool) *outcome { return out[key{c, up}] })
	for _, c := range cfgs {
		for _, up := range []bool{false, true} {
			if err := out[key{c, up}].failed; err != nil {
				return fmt.Errorf("%s %d (upstream=%v): %w", c.mode, c.services, up, err)
			}
		}
	}
	return nil
}

func summary(r result, err error) string {
	if err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		return first
	}
	return fmt.Sprintf("full %.0f ms, change %.1f ms, add %.1f ms, no-op %.1f ms, peak %.1f MiB",
		r.FullSyncMs, median(r.ChangeMs), median(r.AddMs), median(r.NoopMs), float64(r.PeakRSSKiB)/1024)
}

// figure is one measured value; atMost marks a bound ("less than"), where a
// kernel load it divides by did not finish in time.
type figure struct {
	v      float64
	atMost bool
}

// column is one figure of a side: the median over rounds of each round's own
// median (or single value).
type column func(result) figure

func exact(v float64) figure { return figure{v: v} }

var columns = []struct {
	name string
	get  column
	unit func(float64) string
}{
	{"full sync", func(r result) figure { return exact(r.FullSyncMs) }, fmtMs},
	{"one-endpoint change", func(r result) figure { return exact(median(r.ChangeMs)) }, fmtMs},
	{"add service", func(r result) figure { return exact(median(r.AddMs)) }, fmtMs},
	{"no-op", func(r result) figure { return exact(median(r.NoopMs)) }, fmtMs},
	{"periodic sync", func(r result) figure { return exact(median(r.PeriodicMs)) }, fmtMs},
	{"periodic sync CPU", func(r result) figure { return exact(median(r.PeriodicCPUMs)) }, fmtMs},
	{"peak RSS", func(r result) figure { return exact(float64(r.PeakRSSKiB) / 1024) }, func(v float64) string { return fmt.Sprintf("%.0f MiB", v) }},
	{"live heap", func(r result) figure { return exact(r.LiveHeapMiB) }, func(v float64) string { return fmt.Sprintf("%.0f MiB", v) }},
	// The floor: the same final ruleset loaded in one go into an empty
	// namespace, and the full sync as a multiple of it (issue 19, item 5).
	{"kernel-only load", func(r result) figure {
		if r.KernelLoadTimedOut > 0 {
			return figure{v: math.Inf(1)}
		}
		return exact(r.KernelLoadMs)
	}, fmtMs},
	// The floor of a change that rewrites a service chain: one jump rule
	// appended to that loaded ruleset (iptables only).
	{"kernel-only one rule", func(r result) figure {
		if r.KernelOneRuleMs <= 0 {
			return figure{v: math.NaN()}
		}
		return exact(r.KernelOneRuleMs)
	}, fmtMs},
	{"full sync ÷ kernel load", func(r result) figure {
		if r.KernelLoadTimedOut > 0 {
			return figure{v: r.FullSyncMs / float64(r.KernelLoadTimedOut.Milliseconds()), atMost: true}
		}
		if r.KernelLoadMs <= 0 {
			return figure{v: math.NaN()}
		}
		return exact(r.FullSyncMs / r.KernelLoadMs)
	}, func(v float64) string { return fmt.Sprintf("%.2f×", v) }},
}

func fmtMs(ms float64) string {
	switch {
	case math.IsInf(ms, 1):
		return "> " + kernelLoadTimeout.String()
	case ms >= 10000:
		return fmt.Sprintf("%.1f s", ms/1000)
	case ms >= 1000:
		return fmt.Sprintf("%.2f s", ms/1000)
	case ms >= 10:
		return fmt.Sprintf("%.0f ms", ms)
	case ms >= 1:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.2f ms", ms)
	}
}

// value is a side's figure over its rounds, and ok when it has one: its
// median, a bound when any round's was.
func value(o *outcome, get column) (figure, bool) {
	if len(o.runs) == 0 {
		return figure{}, false
	}
	vs := make([]float64, len(o.runs))
	var f figure
	for i, r := range o.runs {
		g := get(r)
		vs[i], f.atMost = g.v, f.atMost || g.atMost
	}
	f.v = median(vs)
	return f, !math.IsNaN(f.v)
}

// cell renders one side's figure: its median, "did not finish in X",
// "failed" or "-" (not measured).
func cell(o *outcome, get column, unit func(float64) string) string {
	f, ok := value(o, get)
	switch {
	case len(o.runs) == 0 && o.timedOut > 0:
		return "did not finish in " + o.timedOut.String()
	case len(o.runs) == 0:
		return "failed"
	case !ok:
		return "-"
	case f.atMost:
		return "< " + unit(f.v)
	}
	return unit(f.v)
}

// ratio renders ours ÷ upstream for a pair of cells, or "" when either side
// has no exact, finite, non-zero figure.
func ratio(ours, up *outcome, get column) string {
	o, ok1 := value(ours, get)
	u, ok2 := value(up, get)
	if !ok1 || !ok2 || o.atMost || u.atMost || u.v == 0 || math.IsInf(o.v, 0) || math.IsInf(u.v, 0) {
		return ""
	}
	return fmt.Sprintf(" (%.2f×)", o.v/u.v)
}

// printSideBySide writes a Markdown table, ours / upstream (and ours ÷
// upstream) in each cell, then
// every round's full sync and one-change figures, so the spread is visible.
func printSideBySide(w io.Writer, cfgs []config, get func(config, bool) *outcome) {
	fmt.Fprint(w, "| mode, services (ours / upstream) | rounds |")
	for _, c := range columns {
		fmt.Fprintf(w, " %s |", c.name)
	}
	fmt.Fprint(w, "\n|---|---|")
	for range columns {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, c := range cfgs {
		o, u := get(c, false), get(c, true)
		fmt.Fprintf(w, "| %s %d | %d / %d |", c.mode, c.services, len(o.runs), len(u.runs))
		for _, col := range columns {
			fmt.Fprintf(w, " %s / %s%s |", cell(o, col.get, col.unit), cell(u, col.get, col.unit), ratio(o, u, col.get))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	for _, c := range cfgs {
		for _, up := range []bool{false, true} {
			o := get(c, up)
			name := "ours"
			if up {
				name = "upstream"
			}
			// Each round's kernel-only load and full sync ÷ it too: the
			// load of the same ruleset moves from round to round, and
			// the ratio with it.
			var full, kernel, change []string
			for _, r := range o.runs {
				full = append(full, fmtMs(r.FullSyncMs))
				change = append(change, fmtMs(median(r.ChangeMs)))
				if r.KernelLoadMs > 0 && r.KernelLoadTimedOut == 0 {
					kernel = append(kernel, fmt.Sprintf("%s (%.2f×)", fmtMs(r.KernelLoadMs), r.FullSyncMs/r.KernelLoadMs))
				}
			}
			kernelPart := ""
			if len(kernel) > 0 {
				kernelPart = "; kernel-only load " + strings.Join(kernel, ", ")
			}
			var end string
			switch {
			case o.timedOut > 0:
				end = fmt.Sprintf("did not finish in %v", o.timedOut)
			case o.failed != nil:
				end = "failed"
			}
			if len(o.runs) == 0 {
				fmt.Fprintf(w, "- %s %d %s: %s\n", c.mode, c.services, name, end)
				continue
			}
			if end != "" {
				end = "; then " + end
			}
			fmt.Fprintf(w, "- %s %d %s: full sync %s%s; one-change %s%s\n", c.mode, c.services, name,
				strings.Join(full, ", "), kernelPart, strings.Join(change, ", "), end)
		}
	}
}
