package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Result is the outcome of one spec in one run.
type Result struct {
	State   string // passed, failed, skipped, ...
	RunTime time.Duration
	Failure string
}

// Run is one e2e run: its name (the result directory's) and its results by spec name.
type Run struct {
	Name    string
	Seconds int
	Specs   map[string]Result
}

type ginkgoReport struct {
	SpecReports []struct {
		ContainerHierarchyTexts []string
		LeafNodeText            string
		LeafNodeType            string
		State                   string
		RunTime                 time.Duration
		Failure                 struct {
			Message string
		}
	}
}

// Load reads DIR/report.json (ginkgo's --json-report) and DIR/seconds (wall time).
func Load(dir string) (Run, error) {
	run := Run{Name: filepath.Base(dir), Specs: map[string]Result{}}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return run, fmt.Errorf("run %s: %w", dir, err)
	}
	var reports []ginkgoReport
	if err := json.Unmarshal(data, &reports); err != nil {
		return run, fmt.Errorf("run %s: decoding report.json: %w", dir, err)
	}
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != "" && s.LeafNodeType != "It" {
				continue // suite setup and teardown nodes
			}
			name := strings.Join(append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText), " ")
			msg := s.Failure.Message
			if i := strings.IndexByte(msg, '\n'); i >= 0 {
				msg = msg[:i]
			}
			run.Specs[name] = Result{State: s.State, RunTime: s.RunTime, Failure: msg}
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "seconds")); err == nil {
		fmt.Sscanf(string(b), "%d", &run.Seconds)
	}
	return run, nil
}

// Skip is one entry of hack/conformance.sh's skip list.
type Skip struct {
	Pattern *regexp.Regexp
	Reason  string
}

// ParseSkips reads "regexp|reason" lines; the reason starts after the last "|" not escaped.
func ParseSkips(lines []string) ([]Skip, error) {
	var out []Skip
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		i := strings.LastIndex(l, "|")
		if i < 0 {
			return nil, fmt.Errorf("skip %q has no reason", l)
		}
		re, err := regexp.Compile(l[:i])
		if err != nil {
			return nil, fmt.Errorf("skip %q: %w", l, err)
		}
		out = append(out, Skip{Pattern: re, Reason: l[i+1:]})
	}
	return out, nil
}

func cell(r Result, ok bool) string {
	if !ok {
		return "–"
	}
	switch r.State {
	case "passed":
		return fmt.Sprintf("pass (%ds)", int(r.RunTime.Seconds()))
	case "skipped":
		return "skip"
	default:
		return "**" + strings.ToUpper(r.State) + "**"
	}
}

// Write prints the table: one row per spec that ran in at least one run, one column per
// run, and a last column naming a defect where upstream passed and ours did not in the same
// mode (runs named upstream-MODE and ours-MODE). Specs matched by focus and by a skip are
// listed after it with the reason.
func Write(w io.Writer, runs []Run, focus *regexp.Regexp, skips []Skip) {
	names := map[string]bool{}
	for _, r := range runs {
		for n, s := range r.Specs {
			// A spec that skipped itself at run time (ginkgo records its reason) is a row;
			// one outside the focus or matched by --skip has no reason and is not.
			if s.State != "skipped" || s.Failure != "" {
				names[n] = true
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)

	fmt.Fprint(w, "| spec |")
	for _, r := range runs {
		fmt.Fprintf(w, " %s |", r.Name)
	}
	fmt.Fprintln(w, " ours vs upstream |")
	fmt.Fprint(w, "|---|")
	for range runs {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w, "---|")
	for _, n := range sorted {
		fmt.Fprintf(w, "| %s |", strings.ReplaceAll(n, "|", `\|`))
		for _, r := range runs {
			s, ok := r.Specs[n]
			fmt.Fprintf(w, " %s |", cell(s, ok))
		}
		fmt.Fprintf(w, " %s |\n", verdict(runs, n))
	}
	fmt.Fprintln(w)
	for _, r := range runs {
		var pass, fail, skip int
		for n, s := range r.Specs {
			switch {
			case s.State == "passed":
				pass++
			case s.State == "skipped":
				if names[n] && s.Failure != "" {
					skip++
				}
			default:
				fail++
			}
		}
		fmt.Fprintf(w, "- %s: %d passed, %d failed, %d skipped, %d s wall\n", r.Name, pass, fail, skip, r.Seconds)
	}
	if focus == nil || len(runs) == 0 {
		return
	}
	var skipped []string
	for n := range runs[0].Specs {
		if !focus.MatchString(n) || names[n] {
			continue
		}
		for _, s := range skips {
			if s.Pattern.MatchString(n) {
				skipped = append(skipped, fmt.Sprintf("| %s | %s |", strings.ReplaceAll(n, "|", `\|`), s.Reason))
				break
			}
		}
	}
	sort.Strings(skipped)
	if len(skipped) > 0 {
		fmt.Fprintf(w, "\nSkipped (%d specs in the focus, not run):\n\n| spec | reason |\n|---|---|\n", len(skipped))
		for _, l := range skipped {
			fmt.Fprintln(w, l)
		}
	}
}

// verdict compares ours-MODE with upstream-MODE for every mode present.
func verdict(runs []Run, spec string) string {
	byName := map[string]Run{}
	for _, r := range runs {
		byName[r.Name] = r
	}
	var out []string
	allSkipped, reason := true, ""
	for _, r := range runs {
		if s := r.Specs[spec]; s.State != "skipped" {
			allSkipped = false
		} else if reason == "" {
			reason = s.Failure
		}
	}
	if allSkipped {
		if len(reason) > 120 {
			reason = reason[:120] + "…"
		}
		return "skipped by the spec: " + strings.ReplaceAll(reason, "|", `\|`)
	}
	for _, r := range runs {
		// ours-MODE pairs with upstream-MODE, ci-ours-MODE with ci-upstream-MODE.
		if !strings.Contains(r.Name, "ours-") {
			continue
		}
		mode := r.Name[strings.Index(r.Name, "ours-")+len("ours-"):]
		up, ok := byName[strings.Replace(r.Name, "ours-", "upstream-", 1)]
		if !ok {
			continue
		}
		o, u := r.Specs[spec], up.Specs[spec]
		switch {
		case u.State == "passed" && o.State != "passed" && o.State != "skipped" && o.State != "":
			out = append(out, "DEFECT ("+mode+")")
		case u.State != "passed" && u.State != "skipped" && u.State != "" && o.State == u.State:
			out = append(out, "both fail ("+mode+")")
		case u.State == "skipped" && o.State == "passed":
			// Not "same": nothing was compared. A spec that skips itself in one run and not
			// in another says the runs differ (a node count, a ginkgo process), not the proxies.
			out = append(out, "skipped with upstream only ("+mode+")")
		case o.State == "skipped" && u.State == "passed":
			out = append(out, "skipped with ours only ("+mode+")")
		}
	}
	if len(out) == 0 {
		return "same"
	}
	return strings.Join(out, ", ")
}
