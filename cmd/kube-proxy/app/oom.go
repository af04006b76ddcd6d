package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// procRoot is where applyOOMScoreAdj finds /proc; tests point it elsewhere.
var procRoot = "/proc"

// applyOOMScoreAdj writes oom_score_adj for pid (0 means this process). It fails
// if the kernel does not keep the value, which happens when the process lacks the
// privilege to lower its score.
func applyOOMScoreAdj(pid, value int) error {
	if runtime.GOOS != "linux" {
		// oomScoreAdj defaults to -999 on every platform, as upstream's does; elsewhere
		// there is no /proc to write it to, and "process does not exist" would mislead.
		return fmt.Errorf("oom_score_adj is Linux-only; not applied on %s", runtime.GOOS)
	}
	if value < -1000 || value > 1000 {
		return fmt.Errorf("invalid oom_score_adj %d: must be within [-1000, 1000]", value)
	}
	who := "self"
	if pid < 0 {
		return fmt.Errorf("invalid pid %d", pid)
	} else if pid > 0 {
		who = strconv.Itoa(pid)
	}
	path := filepath.Join(procRoot, who, "oom_score_adj")
	want := strconv.Itoa(value)
	var lastErr error
	// The write can race with the process changing cgroups; a couple of retries are
	// what upstream does too.
	for range 3 {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("process %s does not exist: %w", who, err)
			}
			lastErr = fmt.Errorf("writing %s: %w", path, err)
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			lastErr = fmt.Errorf("reading back %s: %w", path, err)
			continue
		}
		if strings.TrimSpace(string(got)) != want {
			lastErr = fmt.Errorf("%s is %q after writing %q", path, strings.TrimSpace(string(got)), want)
			continue
		}
		return nil
	}
	return lastErr
}
