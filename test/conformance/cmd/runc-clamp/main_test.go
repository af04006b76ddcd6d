package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestClamp(t *testing.T) {
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Skipf("no /proc/self/oom_score_adj: %v", err)
	}
	floor, _ := strconv.Atoi(strings.TrimSpace(string(own)))
	tests := []struct {
		name string
		args func(bundle string) []string
		adj  int
		want int
	}{
		{"create below own score is raised", func(b string) []string { return []string{"--root", "/r", "create", "--bundle", b, "id"} }, floor - 998, floor},
		{"run with --bundle= form", func(b string) []string { return []string{"run", "--bundle=" + b, "id"} }, floor - 1, floor},
		{"at or above own score is kept", func(b string) []string { return []string{"create", "--bundle", b, "id"} }, floor + 5, floor + 5},
		{"other commands untouched", func(b string) []string { return []string{"start", "id", "--bundle", b} }, floor - 998, floor - 998},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "config.json")
			data, _ := json.Marshal(map[string]any{"ociVersion": "1.0.2", "process": map[string]any{"oomScoreAdj": tc.adj, "args": []string{"/pause"}}})
			if err := os.WriteFile(cfg, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := clamp(tc.args(dir)); err != nil {
				t.Fatal(err)
			}
			var got struct {
				OCIVersion string `json:"ociVersion"`
				Process    struct {
					OOMScoreAdj int      `json:"oomScoreAdj"`
					Args        []string `json:"args"`
				} `json:"process"`
			}
			data, _ = os.ReadFile(cfg)
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			if got.Process.OOMScoreAdj != tc.want || got.OCIVersion != "1.0.2" || len(got.Process.Args) != 1 {
				t.Errorf("config after clamp = %s, want oomScoreAdj %d and the rest unchanged", data, tc.want)
			}
		})
	}
}
