//go:build conformance

// The build tag keeps this suite out of any `go vet ./...` and `go test ./...` of the module:
// it is built only by hack/conformance.sh, with -tags conformance, and run only against the
// cluster that script starts. It lives in test/apiserver because that fixture module is the
// one place k8s.io/kubernetes may be imported (hack/verify-imports.sh checks it).

// Package e2e builds the upstream end-to-end suite restricted to the networking tests: the
// test sources are upstream's (k8s.io/kubernetes/test/e2e/network), only this entry point is
// ours. Registering only the network package keeps the binary (and its cold build) a fraction
// of the full e2e.test while the specs, their names and their behaviour stay upstream's.
package e2e

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/component-base/version"
	upstreame2e "k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2emanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"

	// The feature and label constants must be defined before any spec is declared.
	_ "k8s.io/kubernetes/test/e2e/feature"
	// The only spec source: [sig-network].
	_ "k8s.io/kubernetes/test/e2e/network"

	// Framework hooks the full suite also installs (dumps on failure, node checks, metrics).
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/ktesting/format"
)

func TestMain(m *testing.M) {
	showVersion := flag.Bool("version", false, "print the version of the suite and exit")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Get())
		os.Exit(0)
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", flag.Args())
		os.Exit(2)
	}
	// Manifests and fixtures the specs read are embedded in upstream's packages.
	testfiles.AddFileSource(e2emanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestE2E(t *testing.T) {
	upstreame2e.RunE2ETests(t)
}
