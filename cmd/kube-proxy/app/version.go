package app

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/component-base/version"
)

// placeholderCommit is component-base's gitCommit when no -ldflags -X set it
// (a release build by Kubernetes' scripts does); placeholderVersion its
// gitVersion.
const (
	placeholderCommit  = "$Format:%H$"
	placeholderVersion = "v0.0.0-master+$Format:%H$"
)

// buildVersion is the version this binary reports (--version, the start-up
// log): component-base's when -ldflags set it, else stamped from the build
// information the go command records.
var buildVersion = sync.OnceValue(func() apimachineryversion.Info {
	bi, _ := debug.ReadBuildInfo()
	return versionFromBuildInfo(version.Get(), bi)
})

// versionFromBuildInfo fills base, component-base's version information, from
// bi when no -ldflags set base's commit: the main module's version (a tag such
// as v1.2.3, or the pseudo-version `go build` derives from the checkout), else
// a pseudo-version made of vcs.time and vcs.revision; vcs.revision is the
// commit and vcs.modified=true appends "-dirty", as Kubernetes' own build
// scripts do. A version set with --version=vX.Y.Z is kept. Without build or VCS
// information base is returned unchanged.
func versionFromBuildInfo(base apimachineryversion.Info, bi *debug.BuildInfo) apimachineryversion.Info {
	if base.GitCommit != placeholderCommit {
		return base
	}
	if bi == nil {
		return unknownVersion(base)
	}
	var revision, vcsTime, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			vcsTime = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	// The go command appends "+dirty" to a version it derived from a modified
	// checkout; the vcs.modified setting says the same.
	v, dirty := strings.CutSuffix(bi.Main.Version, "+dirty")
	dirty = dirty || modified == "true"
	if v == "(devel)" {
		v = ""
	}
	if v == "" && revision != "" {
		v = pseudoVersion(vcsTime, revision)
	}
	if v == "" {
		return unknownVersion(base)
	}
	if dirty {
		v += "-dirty"
	}

	info := base
	if base.GitVersion == placeholderVersion {
		info.GitVersion = v
		info.Major, info.Minor = majorMinor(v)
	}
	if revision != "" {
		info.GitCommit = revision
	} else {
		info.GitCommit = ""
	}
	switch {
	case dirty:
		info.GitTreeState = "dirty"
	case modified == "false":
		info.GitTreeState = "clean"
	}
	return info
}

// pseudoVersion is Go's v0.0.0-yyyymmddhhmmss-abcdefabcdef for a commit with
// no tag; the time part is left out if unknown.
func pseudoVersion(vcsTime, revision string) string {
	rev := revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if t, err := time.Parse(time.RFC3339, vcsTime); err == nil {
		return "v0.0.0-" + t.UTC().Format("20060102150405") + "-" + rev
	}
	return "v0.0.0-" + rev
}

// majorMinor are v's first two numbers ("1", "2" for v1.2.3-rc.1).
func majorMinor(v string) (major, minor string) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return "", ""
	}
	return parts[0], parts[1]
}

// printVersionAndExitIfRequested is verflag.PrintAndExitIfRequested with this
// binary's version: --version prints "kube-proxy vX.Y.Z", --version=raw every
// field. It reports whether the command should exit.
func printVersionAndExitIfRequested(fs *pflag.FlagSet, out io.Writer) bool {
	f := fs.Lookup("version")
	if f == nil {
		return false
	}
	switch f.Value.String() {
	case "raw":
		fmt.Fprintf(out, "%#v\n", buildVersion())
		return true
	case "true":
		fmt.Fprintf(out, "%s %s\n", kubeProxy, buildVersion().GitVersion)
		return true
	}
	return false
}

// unknownVersion replaces the unexpanded "$Format:%H$" placeholders of a build that
// recorded neither -ldflags nor VCS information (go build -buildvcs=false, a source
// tarball, GOFLAGS=-buildvcs=false as some machines set): an honest "unknown" instead of
// text that looks like a broken build.
func unknownVersion(base apimachineryversion.Info) apimachineryversion.Info {
	if base.GitVersion == placeholderVersion {
		base.GitVersion = "v0.0.0-unknown"
		base.Major, base.Minor = "0", "0"
	}
	base.GitCommit = "unknown"
	return base
}
