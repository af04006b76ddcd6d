// Command runc-clamp sits between containerd and runc on machines where even root may not
// lower a process's oom_score_adj (a sandboxed VM without CAP_SYS_RESOURCE): there runc's
// init fails with EACCES on the -998 the kubelet asks for every pod sandbox ("can't get final
// child's PID from pipe: EOF"), and containerd 1.6's restrict_oom_score_adj does not cover
// sandboxes. Before "create" or "run" it raises process.oomScoreAdj in the bundle's
// config.json to this process's own score, then runs runc with the same arguments.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const runc = "/usr/sbin/runc"

func main() {
	args := os.Args[1:]
	if err := clamp(args); err != nil {
		fmt.Fprintln(os.Stderr, "runc-clamp:", err)
		os.Exit(1)
	}
	argv := append([]string{runc}, args...)
	if err := syscall.Exec(runc, argv, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "runc-clamp: exec", runc+":", err)
		os.Exit(1)
	}
}

// clamp edits the bundle's config.json when args create or run a container.
func clamp(args []string) error {
	bundle, creates := ".", false
	for i, a := range args {
		switch {
		case a == "create" || a == "run":
			creates = true
		case (a == "--bundle" || a == "-b") && i+1 < len(args):
			bundle = args[i+1]
		case strings.HasPrefix(a, "--bundle="):
			bundle = strings.TrimPrefix(a, "--bundle=")
		}
	}
	if !creates {
		return nil
	}
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return fmt.Errorf("reading own oom_score_adj: %w", err)
	}
	floor, err := strconv.Atoi(strings.TrimSpace(string(own)))
	if err != nil {
		return fmt.Errorf("own oom_score_adj %q: %w", own, err)
	}
	path := filepath.Join(bundle, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var spec map[string]any
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	proc, _ := spec["process"].(map[string]any)
	if proc == nil {
		return nil
	}
	adj, ok := proc["oomScoreAdj"].(float64)
	if !ok || int(adj) >= floor {
		return nil
	}
	proc["oomScoreAdj"] = floor
	out, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}
