package app

import (
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
