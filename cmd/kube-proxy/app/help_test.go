package app

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/component-base/logs"
)

// helpOutput returns what kube-proxy --help prints, with the logging flags cli.Run adds.
func helpOutput(t *testing.T) string {
	t.Helper()
	cmd := NewProxyCommand()
	logs.AddFlags(cmd.PersistentFlags())
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// helpSyntax returns, per flag name, how --help spells the flag itself (the text before
// its usage column), e.g. "--cleanup" or "-v, --v Level".
func helpSyntax(t *testing.T) map[string]string {
	t.Helper()
	help := helpOutput(t)
	_, flags, ok := strings.Cut(help, "\nFlags:\n")
	if !ok {
		t.Fatalf("no Flags: section in --help:\n%s", help)
	}
	syntax := map[string]string{}
	for _, line := range strings.Split(flags, "\n") {
		// A flag's line is indented by 2 ("  -h, --help") or 6 ("      --cleanup");
		// continuation lines of a usage are indented further.
		if !strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "      --") {
			continue
		}
		// pflag puts at least two spaces between the flag and its usage, and never
		// two inside the flag's spelling.
		spelled, _, _ := strings.Cut(strings.TrimLeft(line, " "), "  ")
		name := spelled[strings.Index(spelled, "--")+2:]
		name, _, _ = strings.Cut(name, " ")
		name, _, _ = strings.Cut(name, "[")
		syntax[name] = spelled
	}
	return syntax
}

// TestHelpFlagSyntaxLikeUpstream checks the spelling of flags in --help against
// upstream v1.37.2's (pflag v1.0.10): a boolean flag is a bare "--cleanup", not
// "--cleanup[=true|false]" as pflag v1.1.0 prints it, and --version keeps its
// "version[=true]" placeholder.
func TestHelpFlagSyntaxLikeUpstream(t *testing.T) {
	want := map[string]string{
		"help":                      "-h, --help",
		"version":                   "--version version[=true]",
		"v":                         "-v, --v Level",
		"vmodule":                   "--vmodule pattern=N,...",
		"log-text-info-buffer-size": "--log-text-info-buffer-size quantity",
		"kube-api-qps":              "--kube-api-qps float32",
		"nodeport-addresses":        "--nodeport-addresses strings",
	}
	for name, f := range commandFlags(t) {
		if f.Value.Type() == "bool" && !f.Hidden {
			want[name] = "--" + name
		}
	}
	if len(want) < 15 {
		t.Fatalf("only %d flags to check; the boolean flags were not found", len(want))
	}

	got := helpSyntax(t)
	for name, w := range want {
		if got[name] != w {
			t.Errorf("--help spells --%s as %q, upstream as %q", name, got[name], w)
		}
	}
}

// TestHelpLocalNodeServeSyntax: pflag takes a backquoted word in a usage for the
// value's name; the --localnode-serve usage once quoted a command, and --help showed
// "--localnode-serve kube-proxy state --socket".
func TestHelpLocalNodeServeSyntax(t *testing.T) {
	got := helpSyntax(t)
	for _, name := range []string{"localnode-serve", "localnode-serve-tls-cert-file", "localnode-serve-tls-private-key-file",
		"localnode-serve-client-ca-file", "localnode-source", "localnode-source-ca-file"} {
		if want := "--" + name + " string"; got[name] != want {
			t.Errorf("--help spells --%s as %q, want %q", name, got[name], want)
		}
	}
}

// traceHelpSections returns the flag names of each section of `kube-proxy trace
// --help`, by heading ("Flags:", kube-proxy's own flags, "Global Flags:").
func traceHelpSections(t *testing.T) (string, map[string][]string) {
	t.Helper()
	cmd := NewProxyCommand()
	logs.AddFlags(cmd.PersistentFlags())
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"trace", "--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	sections := map[string][]string{}
	heading := ""
	for _, line := range strings.Split(out.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "  -") || strings.HasPrefix(line, "      --"):
			spelled, _, _ := strings.Cut(strings.TrimLeft(line, " "), "  ")
			name := spelled[strings.Index(spelled, "--")+2:]
			name, _, _ = strings.Cut(name, " ")
			sections[heading] = append(sections[heading], name)
		case line != "" && !strings.HasPrefix(line, " ") && strings.HasSuffix(line, ":"):
			heading = line
		}
	}
	return out.String(), sections
}

// `kube-proxy trace --help` shows the flags that say what to trace first, and
// kube-proxy's own (some 70, for computing rules) apart, under their own heading.
func TestTraceHelpGroupsFlags(t *testing.T) {
	help, sections := traceHelpSections(t)
	own := sections["Flags:"]
	const proxyHeading = "Kube-proxy Flags:"
	if _, ok := sections[proxyHeading]; !ok {
		t.Fatalf("no heading for kube-proxy's own flags in trace --help:\n%s", help)
	}
	proxy := sections[proxyHeading]
	for _, tc := range []struct {
		section string
		got     []string
		want    []string
		notWant []string
	}{
		{"Flags:", own,
			[]string{"from", "to", "from-host", "in-interface", "netns", "live", "output", "local-addresses", "bridges", "verbose", "max-differences", "help"},
			[]string{"manifests", "proxy-mode", "cluster-cidr", "iptables-sync-period", "kubeconfig", "dry-run", "v"}},
		{proxyHeading, proxy,
			[]string{"manifests", "proxy-mode", "cluster-cidr", "iptables-sync-period", "kubeconfig", "master", "config", "hostname-override", "v"},
			[]string{"from", "to", "netns", "live", "help", "dry-run", "cleanup", "init-only", "write-config-to"}},
		{"Global Flags:", sections["Global Flags:"], []string{"version"}, []string{"from", "manifests"}},
	} {
		for _, w := range tc.want {
			if !slices.Contains(tc.got, w) {
				t.Errorf("%s lacks --%s: %v", tc.section, w, tc.got)
			}
		}
		for _, w := range tc.notWant {
			if slices.Contains(tc.got, w) {
				t.Errorf("%s lists --%s: %v", tc.section, w, tc.got)
			}
		}
	}
	if strings.Index(help, "\nFlags:\n") > strings.Index(help, proxyHeading) {
		t.Errorf("kube-proxy's flags come before trace's own:\n%s", help)
	}
	if len(own) > 15 || len(proxy) < 40 {
		t.Errorf("%d flags of trace's own, %d of kube-proxy's: the grouping is off", len(own), len(proxy))
	}
}
