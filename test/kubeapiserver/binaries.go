//go:build linux

package kubeapiserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Versions of the fixture binaries hack/build-fixtures.sh builds; the cache holds them
// under these names.
const (
	APIServerVersion = "v1.37.2"
	EtcdVersion      = "v3.6.16"
)

// DefaultCacheDir is where hack/build-fixtures.sh puts the binaries unless
// KUBE_PROXY_FIXTURE_CACHE says otherwise.
const DefaultCacheDir = "/var/cache/kube-proxy-fixtures"

// Binaries are the paths of the executables a Server runs.
type Binaries struct {
	APIServer string
	Etcd      string
}

// FindBinaries locates kube-apiserver and etcd: KUBE_APISERVER_BIN and ETCD_BIN win,
// else the versioned files in the fixture cache. The error names every path tried and
// how to build the missing binary.
func FindBinaries() (Binaries, error) {
	cache := cacheDir()
	var errs []error
	find := func(env, cached string) string {
		path := os.Getenv(env)
		source := "$" + env
		if path == "" {
			path = filepath.Join(cache, cached)
			source = "the fixture cache"
		}
		info, err := os.Stat(path)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s from %s: %w", cached, source, err))
		case info.IsDir() || info.Mode()&0o111 == 0:
			errs = append(errs, fmt.Errorf("%s from %s: %s is not an executable file", cached, source, path))
		}
		return path
	}
	b := Binaries{
		APIServer: find("KUBE_APISERVER_BIN", "kube-apiserver-"+APIServerVersion),
		Etcd:      find("ETCD_BIN", "etcd-"+EtcdVersion),
	}
	if len(errs) > 0 {
		return Binaries{}, fmt.Errorf("%w (run hack/build-fixtures.sh once, ~15-25 min cold, or set KUBE_APISERVER_BIN and ETCD_BIN)", errors.Join(errs...))
	}
	return b, nil
}

func cacheDir() string {
	if cache := os.Getenv("KUBE_PROXY_FIXTURE_CACHE"); cache != "" {
		return cache
	}
	return DefaultCacheDir
}

// Required reports whether missing binaries must fail tests instead of skipping them
// (KUBE_PROXY_REQUIRE_APISERVER=1, set by CI).
func Required() bool { return os.Getenv("KUBE_PROXY_REQUIRE_APISERVER") == "1" }

// RequireBinaries returns the binaries, or ends the test: a skip naming what is missing,
// or a failure when Required.
func RequireBinaries(tb testing.TB) Binaries {
	tb.Helper()
	b, err := FindBinaries()
	if err != nil && Required() && awaitBuild(tb, cacheDir()) {
		b, err = FindBinaries()
	}
	if err != nil {
		if Required() {
			tb.Fatalf("KUBE_PROXY_REQUIRE_APISERVER=1 but the API server fixtures are missing: %v", err)
		}
		tb.Skipf("needs the kube-apiserver and etcd fixtures: %v", err)
	}
	return b
}

// DefaultConformanceCacheDir is where hack/conformance.sh keeps upstream's cluster
// binaries (per version) unless KUBE_PROXY_CONFORMANCE_CACHE says otherwise; its
// kube-proxy is the same build as the fixture cache's.
const DefaultConformanceCacheDir = "/var/cache/kube-proxy-conformance"

// FindUpstreamKubeProxy locates upstream's kube-proxy APIServerVersion, for tests that
// run it side by side with ours: KUBE_PROXY_UPSTREAM_BIN wins, then
// kube-proxy-<version> in the fixture cache (hack/build-fixtures.sh builds it), then
// hack/conformance.sh's cache. The error names every path tried.
func FindUpstreamKubeProxy() (string, error) {
	var candidates []string
	if env := os.Getenv("KUBE_PROXY_UPSTREAM_BIN"); env != "" {
		candidates = []string{env}
	} else {
		conformance := os.Getenv("KUBE_PROXY_CONFORMANCE_CACHE")
		if conformance == "" {
			conformance = DefaultConformanceCacheDir
		}
		candidates = []string{
			filepath.Join(cacheDir(), "kube-proxy-"+APIServerVersion),
			filepath.Join(conformance, APIServerVersion, "kube-proxy"),
		}
	}
	var errs []error
	for _, path := range candidates {
		info, err := os.Stat(path)
		switch {
		case err != nil:
			errs = append(errs, err)
		case info.IsDir() || info.Mode()&0o111 == 0:
			errs = append(errs, fmt.Errorf("%s is not an executable file", path))
		default:
			return path, nil
		}
	}
	return "", fmt.Errorf("upstream kube-proxy %s: %w (run hack/build-fixtures.sh, or set KUBE_PROXY_UPSTREAM_BIN)", APIServerVersion, errors.Join(errs...))
}

// RequireUpstreamKubeProxy returns upstream's kube-proxy, or ends the test: a skip
// naming what is missing, or a failure when Required.
func RequireUpstreamKubeProxy(tb testing.TB) string {
	tb.Helper()
	path, err := FindUpstreamKubeProxy()
	if err != nil && Required() && awaitBuild(tb, cacheDir()) {
		path, err = FindUpstreamKubeProxy()
	}
	if err != nil {
		if Required() {
			tb.Fatalf("KUBE_PROXY_REQUIRE_APISERVER=1 but %v", err)
		}
		tb.Skipf("needs upstream's kube-proxy to compare with: %v", err)
	}
	return path
}
