// Command testreport turns `go test -json` on its standard input into one line per
// package as each finishes, a heartbeat naming what is still running, the full output of
// every failed test, and a closing summary with the slowest packages and tests.
//
// hack/test.sh pipes every `go test` through it. Plain `go test` prints nothing while it
// compiles and runs a 2-core machine's ~60 race-instrumented packages, which looked like
// a hang for 25 minutes to a newcomer; this says what is happening at least once a minute.
//
// It exits 1 when any package or test failed or did not build; hack/test.sh also checks
// go test's own status (pipefail), which covers what go test prints as plain text.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is the subset of test2json's output this reads (`go doc test2json`).
type event struct {
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string
}

// report accumulates events. It is not safe for concurrent use; main feeds it from one
// goroutine and the heartbeat reads it under the same loop.
type report struct {
	out     io.Writer
	started time.Time
	total   int // packages expected, 0 when unknown

	running  map[string]time.Time
	done     int
	failed   []string
	pkgTime  map[string]float64
	slow     []testTime
	skipped  map[string]int
	output   map[string][]string // package/test -> lines, kept until the test ends
	buildOut map[string][]string // import path -> compiler output
}

type testTime struct {
	name    string
	elapsed float64
}

// slowTest is the threshold above which a test is listed in the summary: the tests
// worth moving behind -short when the command gets slow again.
const slowTest = 20.0

func newReport(out io.Writer, total int, now time.Time) *report {
	return &report{
		out: out, started: now, total: total,
		running: map[string]time.Time{}, pkgTime: map[string]float64{},
		skipped: map[string]int{}, output: map[string][]string{}, buildOut: map[string][]string{},
	}
}

func key(e event) string { return e.Package + "\x00" + e.Test }

func (r *report) handle(e event, now time.Time) {
	switch e.Action {
	case "build-output":
		r.buildOut[e.ImportPath] = append(r.buildOut[e.ImportPath], e.Output)
		return
	case "build-fail":
		fmt.Fprintf(r.out, "FAIL %s [build failed]\n", e.ImportPath)
		for _, l := range r.buildOut[e.ImportPath] {
			fmt.Fprint(r.out, "    ", l)
		}
		r.failed = append(r.failed, e.ImportPath+" [build failed]")
		return
	}
	if e.Package == "" {
		return
	}
	if e.Test != "" {
		r.handleTest(e)
		return
	}
	switch e.Action {
	case "start":
		r.running[e.Package] = now
	case "output":
		// Package-level output: a panic outside a test, a timeout, TestMain's prints.
		r.output[key(e)] = append(r.output[key(e)], e.Output)
	case "pass", "fail", "skip":
		delete(r.running, e.Package)
		r.done++
		r.pkgTime[e.Package] = e.Elapsed
		r.packageLine(e)
	}
}

func (r *report) handleTest(e event) {
	k := key(e)
	switch e.Action {
	case "output":
		r.output[k] = append(r.output[k], e.Output)
	case "pass":
		delete(r.output, k)
		if e.Elapsed >= slowTest && !strings.Contains(e.Test, "/") {
			r.slow = append(r.slow, testTime{e.Package + "." + e.Test, e.Elapsed})
		}
	case "skip":
		delete(r.output, k)
		if !strings.Contains(e.Test, "/") {
			r.skipped[e.Package]++
		}
	case "fail":
		// A parent test fails when a subtest does; the subtest's own lines are printed
		// with it, so the parent prints only what it logged itself.
		fmt.Fprintf(r.out, "--- FAIL %s.%s (%.1fs)\n", e.Package, e.Test, e.Elapsed)
		for _, l := range r.output[k] {
			fmt.Fprint(r.out, "    ", l)
		}
		delete(r.output, k)
		r.failed = append(r.failed, e.Package+"."+e.Test)
	}
}

func (r *report) packageLine(e event) {
	progress := fmt.Sprintf("[%d", r.done)
	if r.total > 0 {
		progress += fmt.Sprintf("/%d", r.total)
	}
	progress += "]"
	extra := ""
	if n := r.skipped[e.Package]; n > 0 {
		extra = fmt.Sprintf(" (%d skipped: go test -v -run ... %s for why)", n, e.Package)
	}
	k := key(e)
	switch e.Action {
	case "pass":
		fmt.Fprintf(r.out, "%s ok   %s %.1fs%s\n", progress, e.Package, e.Elapsed, extra)
	case "skip":
		fmt.Fprintf(r.out, "%s -    %s [no tests]\n", progress, e.Package)
	case "fail":
		fmt.Fprintf(r.out, "%s FAIL %s %.1fs\n", progress, e.Package, e.Elapsed)
		for _, l := range r.output[k] {
			fmt.Fprint(r.out, "    ", l)
		}
		r.failed = append(r.failed, e.Package)
	}
	delete(r.output, k)
}

// heartbeat says what is running, so a long compile or test is visibly not a hang.
func (r *report) heartbeat(now time.Time) {
	names := make([]string, 0, len(r.running))
	for p, since := range r.running {
		names = append(names, fmt.Sprintf("%s (%s)", p, now.Sub(since).Round(time.Second)))
	}
	sort.Strings(names)
	state := "compiling"
	if len(names) > 0 {
		state = "running " + strings.Join(names, ", ")
	}
	fmt.Fprintf(r.out, "... %s elapsed, %d packages done; %s\n", now.Sub(r.started).Round(time.Second), r.done, state)
}

func (r *report) summary(now time.Time) {
	type pt struct {
		p string
		t float64
	}
	var ps []pt
	for p, t := range r.pkgTime {
		ps = append(ps, pt{p, t})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].t > ps[j].t })
	if len(ps) > 5 {
		ps = ps[:5]
	}
	fmt.Fprintf(r.out, "%d packages in %s; slowest:", r.done, now.Sub(r.started).Round(time.Second))
	for _, p := range ps {
		fmt.Fprintf(r.out, " %s %.0fs;", strings.TrimPrefix(strings.TrimPrefix(p.p, "k8s.io/kube-proxy/"), "k8s.io/"), p.t)
	}
	fmt.Fprintln(r.out)
	sort.Slice(r.slow, func(i, j int) bool { return r.slow[i].elapsed > r.slow[j].elapsed })
	for _, s := range r.slow {
		fmt.Fprintf(r.out, "  slow test: %s %.0fs\n", s.name, s.elapsed)
	}
	if len(r.failed) > 0 {
		fmt.Fprintf(r.out, "FAILED: %s\n", strings.Join(r.failed, ", "))
	}
}

func main() {
	total := flag.Int("packages", 0, "packages expected, for the [done/total] counter")
	every := flag.Duration("heartbeat", time.Minute, "print what is running this often")
	flag.Parse()

	r := newReport(os.Stdout, *total, time.Now())
	lines := make(chan []byte)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(lines)
	}()
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for {
		select {
		case now := <-tick.C:
			r.heartbeat(now)
		case l, ok := <-lines:
			if !ok {
				r.summary(time.Now())
				if len(r.failed) > 0 {
					os.Exit(1)
				}
				return
			}
			var e event
			if len(l) == 0 || l[0] != '{' || json.Unmarshal(l, &e) != nil {
				// go test's own errors (a package that does not exist) come as
				// plain text: pass them through; go test's exit status fails the run.
				fmt.Fprintln(r.out, string(l))
				continue
			}
			r.handle(e, time.Now())
		}
	}
}
