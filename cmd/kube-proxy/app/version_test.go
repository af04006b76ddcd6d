package app

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/component-base/version/verflag"
)

func TestVersionFromBuildInfo(t *testing.T) {
	unstamped := apimachineryversion.Info{
		GitVersion: placeholderVersion, GitCommit: placeholderCommit, BuildDate: "1970-01-01T00:00:00Z", GoVersion: "go1.26",
	}
	const rev = "abcdef1234567890abcdef1234567890abcdef12"
	vcs := func(modified string) []debug.BuildSetting {
		s := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-11-28T21:05:09Z"}}
		if modified != "" {
			s = append(s, debug.BuildSetting{Key: "vcs.modified", Value: modified})
		}
		return s
	}
	bi := func(version string, settings []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "k8s.io/kube-proxy", Version: version}, Settings: settings}
	}
	tests := []struct {
		name                 string
		base                 apimachineryversion.Info
		bi                   *debug.BuildInfo
		wantVersion          string
		wantCommit           string
		wantTree             string
		wantMajor, wantMinor string
	}{{
		name: "tag, clean checkout", base: unstamped, bi: bi("v1.2.3", vcs("false")),
		wantVersion: "v1.2.3", wantCommit: rev, wantTree: "clean", wantMajor: "1", wantMinor: "2",
	}, {
		name: "tag from the module cache: no VCS", base: unstamped, bi: bi("v1.2.3", nil),
		wantVersion: "v1.2.3", wantCommit: "", wantMajor: "1", wantMinor: "2",
	}, {
		name: "pseudo-version from go build", base: unstamped, bi: bi("v0.0.0-20261128210509-abcdef123456", vcs("false")),
		wantVersion: "v0.0.0-20261128210509-abcdef123456", wantCommit: rev, wantTree: "clean", wantMajor: "0", wantMinor: "0",
	}, {
		name: "devel with vcs.revision", base: unstamped, bi: bi("(devel)", vcs("false")),
		wantVersion: "v0.0.0-20261128210509-abcdef123456", wantCommit: rev, wantTree: "clean", wantMajor: "0", wantMinor: "0",
	}, {
		name: "dirty, as go build says it", base: unstamped, bi: bi("v0.0.0-20261128210509-abcdef123456+dirty", vcs("true")),
		wantVersion: "v0.0.0-20261128210509-abcdef123456-dirty", wantCommit: rev, wantTree: "dirty", wantMajor: "0", wantMinor: "0",
	}, {
		name: "dirty devel", base: unstamped, bi: bi("(devel)", vcs("true")),
		wantVersion: "v0.0.0-20261128210509-abcdef123456-dirty", wantCommit: rev, wantTree: "dirty", wantMajor: "0", wantMinor: "0",
	}, {
		name: "nothing recorded", base: unstamped, bi: bi("(devel)", nil),
		wantVersion: "v0.0.0-unknown", wantCommit: "unknown", wantMajor: "0", wantMinor: "0",
	}, {
		name: "no build information", base: unstamped, bi: nil,
		wantVersion: "v0.0.0-unknown", wantCommit: "unknown", wantMajor: "0", wantMinor: "0",
	}, {
		name:        "ldflags set the version: kept",
		base:        apimachineryversion.Info{GitVersion: "v1.37.2", GitCommit: "0123456789", GitTreeState: "clean", Major: "1", Minor: "37"},
		bi:          bi("v0.0.0-20261128210509-abcdef123456", vcs("true")),
		wantVersion: "v1.37.2", wantCommit: "0123456789", wantTree: "clean", wantMajor: "1", wantMinor: "37",
	}, {
		name:        "--version=vX.Y.Z set the version: kept, commit filled",
		base:        apimachineryversion.Info{GitVersion: "v0.0.0-custom", GitCommit: placeholderCommit},
		bi:          bi("v0.0.0-20261128210509-abcdef123456", vcs("false")),
		wantVersion: "v0.0.0-custom", wantCommit: rev, wantTree: "clean",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := versionFromBuildInfo(tc.base, tc.bi)
			if got.GitVersion != tc.wantVersion || got.GitCommit != tc.wantCommit || got.GitTreeState != tc.wantTree ||
				got.Major != tc.wantMajor || got.Minor != tc.wantMinor {
				t.Errorf("got version %q commit %q tree %q major %q minor %q; want %q %q %q %q %q",
					got.GitVersion, got.GitCommit, got.GitTreeState, got.Major, got.Minor,
					tc.wantVersion, tc.wantCommit, tc.wantTree, tc.wantMajor, tc.wantMinor)
			}
			if got.BuildDate != tc.base.BuildDate || got.GoVersion != tc.base.GoVersion {
				t.Errorf("build date and Go version changed: %+v", got)
			}
		})
	}
}

func TestPrintVersion(t *testing.T) {
	for _, tc := range []struct {
		arg      string
		wantExit bool
		want     string
	}{
		{"", false, ""},
		{"--version", true, "kube-proxy " + buildVersion().GitVersion + "\n"},
		{"--version=raw", true, "version.Info{"},
	} {
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		verflag.AddFlags(fs)
		var args []string
		if tc.arg != "" {
			args = append(args, tc.arg)
		}
		// --version is component-base's global flag: reset it after.
		t.Cleanup(func() { _ = fs.Set("version", "false") })
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if exit := printVersionAndExitIfRequested(fs, &out); exit != tc.wantExit || !strings.HasPrefix(out.String(), tc.want) {
			t.Errorf("%q: exit %v, printed %q; want %v, %q", tc.arg, exit, out.String(), tc.wantExit, tc.want)
		}
	}
}
