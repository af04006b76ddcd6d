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
