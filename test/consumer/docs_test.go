package consumer_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository holding this module, whose documents are checked here.
const repoRoot = "../.."

// librarySection is the README heading whose go.mod lines this module must use.
const librarySection = "## Use it as a library"

// fence is one fenced code block of a Markdown document.
type fence struct {
	lang string
	// compiled is the repository path named by a "<!-- compiled: path -->" comment on
	// the line before the opening fence: the file the block is compiled in.
	compiled string
	line     int
	body     []string
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fences returns the fenced blocks of md (indented fences included, as in list items).
func fences(md string) []fence {
	var out []fence
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "```") {
			continue
		}
		f := fence{lang: strings.TrimPrefix(l, "```"), line: i + 1}
		if i > 0 {
			prev := strings.TrimSpace(lines[i-1])
			if p, ok := strings.CutPrefix(prev, "<!-- compiled:"); ok {
				f.compiled = strings.TrimSpace(strings.TrimSuffix(p, "-->"))
			}
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			f.body = append(f.body, lines[i])
		}
		out = append(out, f)
	}
	return out
}

// section returns the text under heading, up to the next heading of the same or a
// higher level.
func section(t *testing.T, md, heading string) string {
	t.Helper()
	level := strings.Index(heading, " ")
	start := strings.Index(md, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("no %q section", heading)
	}
	rest := md[start+len(heading)+2:]
	for _, l := range strings.SplitAfter(rest, "\n") {
		if h := strings.TrimSpace(l); strings.HasPrefix(h, "#") {
			if n := len(h) - len(strings.TrimLeft(h, "#")); n <= level {
				return rest[:strings.Index(rest, l)]
			}
		}
	}
	return rest
}

// normalized drops blank lines and indentation, which Markdown lists and gofmt change.
func normalized(lines []string) []string {
	var out []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func containsRun(haystack, needle []string) bool {
	for i := 0; i+len(needle) <= len(haystack); i++ {
		if slices.Equal(haystack[i:i+len(needle)], needle) {
			return true
		}
	}
	return false
}

// TestDocsCompiled checks that the documents' Go code is the code compiled (and, for
// Examples with output, run) by tests: each block marked "<!-- compiled: file -->"
// appears line for line in that file. On the migration page and in the README's library
// section every Go block must be marked.
func TestDocsCompiled(t *testing.T) {
	tests := []struct {
		doc, heading string
		allMarked    bool
		// minMarked guards against a document whose markers were all lost.
		minMarked int
	}{
		{doc: "README.md", heading: librarySection, allMarked: true, minMarked: 1},
		{doc: "docs/migrating-from-kubernetes.md", allMarked: true, minMarked: 3},
		{doc: "docs/writing-a-proxy.md", minMarked: 1},
	}
	for _, tc := range tests {
		t.Run(tc.doc, func(t *testing.T) {
			md := readDoc(t, tc.doc)
			if tc.heading != "" {
				md = section(t, md, tc.heading)
			}
			marked := 0
			for _, f := range fences(md) {
				if f.lang != "go" {
					continue
				}
				if f.compiled == "" {
					if tc.allMarked {
						t.Errorf("%s: Go block at line %d of the section is not marked <!-- compiled: file -->", tc.doc, f.line)
					}
					continue
				}
				marked++
				src := strings.Split(readDoc(t, f.compiled), "\n")
				if !containsRun(normalized(src), normalized(f.body)) {
					t.Errorf("%s: the Go block at line %d of the section is not in %s as written:\n%s",
						tc.doc, f.line, f.compiled, strings.Join(f.body, "\n"))
				}
			}
			if marked < tc.minMarked {
				t.Errorf("%s: %d compiled Go blocks, want at least %d", tc.doc, marked, tc.minMarked)
			}
		})
	}
}

// goMod is what the check needs of a go.mod file.
type goMod struct {
	require map[string]string // module → version
	replace map[string]string // module → local path
}

func parseGoMod(lines []string) goMod {
	m := goMod{require: map[string]string{}, replace: map[string]string{}}
	block := ""
	for _, l := range lines {
		l, _, _ = strings.Cut(l, "//")
		l = strings.TrimSpace(l)
		switch {
		case l == "":
			continue
		case l == ")":
			block = ""
			continue
		case strings.HasSuffix(l, "("):
			block = strings.TrimSpace(strings.TrimSuffix(l, "("))
			continue
		}
		directive, rest := block, l
		if block == "" {
			directive, rest, _ = strings.Cut(l, " ")
		}
		f := strings.Fields(rest)
		switch {
		case directive == "require" && len(f) == 2:
			m.require[f[0]] = f[1]
		case directive == "replace" && len(f) == 3 && f[1] == "=>":
			m.replace[f[0]] = f[2]
		}
	}
	return m
}

// TestReadmeGoModLines checks that the go.mod lines the README gives a consumer are the
// ones this module uses, with only the checkout's location differing: the same modules
// replaced, at the same places relative to the checkout, and the same k8s.io/kube-proxy
// requirement.
func TestReadmeGoModLines(t *testing.T) {
	var blocks []fence
	for _, f := range fences(section(t, readDoc(t, "README.md"), librarySection)) {
		if f.lang == "go-mod" {
			blocks = append(blocks, f)
		}
	}
	if len(blocks) != 1 {
		t.Fatalf("README %q has %d go-mod blocks, want 1", librarySection, len(blocks))
	}
	readme := parseGoMod(blocks[0].body)
	data, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	ours := parseGoMod(strings.Split(string(data), "\n"))

	const self = "k8s.io/kube-proxy"
	relative := func(m goMod) map[string]string {
		root, ok := m.replace[self]
		if !ok {
			t.Fatalf("no replace for %s", self)
		}
		out := map[string]string{}
		for mod, path := range m.replace {
			rel, ok := strings.CutPrefix(path, root)
			if !ok {
				t.Errorf("%s is replaced by %s, outside the checkout %s", mod, path, root)
			}
			out[mod] = rel
		}
		return out
	}
	if r, o := relative(readme), relative(ours); !maps.Equal(r, o) {
		t.Errorf("replace lines differ: README %v, test/consumer %v", readme.replace, ours.replace)
	}
	if len(readme.replace) != 2 {
		t.Errorf("README replaces %d modules, want k8s.io/kube-proxy and k8s.io/net-utils", len(readme.replace))
	}
	for mod, v := range readme.require {
		if ours.require[mod] != v {
			t.Errorf("README requires %s %s, test/consumer %q", mod, v, ours.require[mod])
		}
	}
	if readme.require[self] == "" {
		t.Errorf("README does not require %s", self)
	}
}

// TestMigrationTargetsExist lists every package the migration page's import-path table
// points to: a renamed or removed package must be corrected there.
func TestMigrationTargetsExist(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("needs the go command to list packages: %v", err)
	}
	md := section(t, readDoc(t, "docs/migrating-from-kubernetes.md"), "## Import paths")
	var targets []string
	for _, l := range strings.Split(md, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 4 || !strings.Contains(cells[1], "`") || strings.TrimSpace(cells[2]) == "here" {
			continue
		}
		// The first code span of the second column is the package.
		_, rest, ok := strings.Cut(cells[2], "`")
		target, _, ok2 := strings.Cut(rest, "`")
		if !ok || !ok2 {
			t.Errorf("table row without a target package: %s", l)
			continue
		}
		targets = append(targets, target)
	}
	if len(targets) < 25 {
		t.Fatalf("found %d rows in the import-path table; the parser or the page is broken", len(targets))
	}
	out, err := exec.Command(goBin, append([]string{"list", "-e", "-f", "{{.ImportPath}} {{if .Error}}{{.Error}}{{end}}"}, targets...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, problem, _ := strings.Cut(l, " "); problem != "" {
			t.Errorf("%s: %s", path, problem)
		}
	}
}
