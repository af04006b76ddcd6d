package report

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func writeRun(t *testing.T, dir, name, json string) string {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "report.json"), []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

const spec = `{"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeText":"%s","LeafNodeType":"It","State":"%s","RunTime":2000000000,"Failure":{"Message":"%s"}}`

func report(specs ...string) string {
	return `[{"SpecReports":[` + strings.Join(specs, ",") + `]}]`
}

func sp(name, state string, msg ...string) string {
	m := ""
	if len(msg) > 0 {
		m = msg[0]
	}
	return strings.Replace(strings.Replace(strings.Replace(spec, "%s", name, 1), "%s", state, 1), "%s", m, 1)
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name     string
		upstream string
		ours     string
		want     []string
		notWant  []string
	}{
		{
			name:     "ours fails where upstream passes: a defect",
			upstream: report(sp("should serve", "passed")),
			ours:     report(sp("should serve", "failed")),
			want:     []string{"| [sig-network] Services should serve | pass (2s) | **FAILED** | DEFECT (iptables) |", "ours-iptables: 0 passed, 1 failed"},
		},
		{
			name:     "both fail: no defect",
			upstream: report(sp("needs two nodes", "failed")),
			ours:     report(sp("needs two nodes", "failed")),
			want:     []string{"both fail (iptables)"},
			notWant:  []string{"DEFECT"},
		},
		{
			name:     "skipped everywhere: not a row, listed with its reason",
			upstream: report(sp("should serve", "passed"), sp("LoadBalancer works", "skipped")),
			ours:     report(sp("should serve", "passed"), sp("LoadBalancer works", "skipped")),
			want:     []string{"| [sig-network] Services LoadBalancer works | needs a cloud |", "| same |"},
			notWant:  []string{"LoadBalancer works | skip"},
		},
		{
			name:     "passed with upstream, skipped itself with ours: not compared, not same",
			upstream: report(sp("node-Service", "passed")),
			ours:     report(sp("node-Service", "skipped", "Requires at least 2 nodes (not -1)")),
			want:     []string{"| pass (2s) | skip | skipped with ours only (iptables) |"},
			notWant:  []string{"| same |", "DEFECT"},
		},
		{
			name:     "skipped itself with upstream, passed with ours",
			upstream: report(sp("node-Service", "skipped", "Requires at least 2 nodes (not -1)")),
			ours:     report(sp("node-Service", "passed")),
			want:     []string{"| skip | pass (2s) | skipped with upstream only (iptables) |"},
			notWant:  []string{"| same |"},
		},
		{
			name:     "skipped by the spec itself: a row with the spec's reason",
			upstream: report(sp("needs 2 nodes", "skipped", "Requires at least 2 nodes (not 1)")),
			ours:     report(sp("needs 2 nodes", "skipped", "Requires at least 2 nodes (not 1)")),
			want:     []string{"| skip | skip | skipped by the spec: Requires at least 2 nodes (not 1) |", "ours-iptables: 0 passed, 0 failed, 1 skipped"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			up, err := Load(writeRun(t, dir, "upstream-iptables", tc.upstream))
			if err != nil {
				t.Fatal(err)
			}
			ours, err := Load(writeRun(t, dir, "ours-iptables", tc.ours))
			if err != nil {
				t.Fatal(err)
			}
			skips, err := ParseSkips([]string{`LoadBalancer|needs a cloud`})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			Write(&buf, []Run{up, ours}, regexp.MustCompile(`sig-network`), skips)
			for _, w := range tc.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, buf.String())
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(buf.String(), w) {
					t.Errorf("output has %q:\n%s", w, buf.String())
				}
			}
		})
	}
}
