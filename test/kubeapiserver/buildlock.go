//go:build linux

package kubeapiserver

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildLockName is the file hack/build-fixtures.sh holds an exclusive flock on while it
// builds.
const buildLockName = ".build.lock"

// DefaultBuildWait bounds how long RequireBinaries waits for a fixture build in progress
// (KUBE_PROXY_FIXTURE_WAIT overrides it): a cold build takes 15–26 minutes.
const DefaultBuildWait = 40 * time.Minute

// One wait per test binary: once a build has been waited for (or found absent), later
// tests look only at the binaries.
var (
	awaitOnce sync.Once
	awaited   bool
)

// awaitBuild waits while hack/build-fixtures.sh holds its lock in cache, so that CI can
// build the fixtures in the background while other tests run. It returns whether a build
// was in progress and has ended; false at once when none is running, or when the wait
// would outlast the test binary's -timeout or KUBE_PROXY_FIXTURE_WAIT.
func awaitBuild(tb testing.TB, cache string) bool {
	tb.Helper()
	awaitOnce.Do(func() {
		limit := DefaultBuildWait
		if v := os.Getenv("KUBE_PROXY_FIXTURE_WAIT"); v != "" {
			if d, err := time.ParseDuration(v); err == nil {
				limit = d
			} else {
				tb.Logf("ignoring KUBE_PROXY_FIXTURE_WAIT=%q: %v", v, err)
			}
		}
		deadline := time.Now().Add(limit)
		// Leave the tests themselves a few minutes before go test's -timeout panics.
		if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
			if end, set := d.Deadline(); set && end.Add(-5*time.Minute).Before(deadline) {
				deadline = end.Add(-5 * time.Minute)
			}
		}
		awaited = waitUnlocked(tb, filepath.Join(cache, buildLockName), deadline, 5*time.Second)
	})
	return awaited
}

// waitUnlocked reports whether the lock file was locked when called and became free
// before deadline, polling every interval.
func waitUnlocked(tb testing.TB, path string, deadline time.Time, interval time.Duration) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	began := time.Now()
	lastLog := began
	for i := 0; ; i++ {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			if i > 0 {
				tb.Logf("the fixture build ended after %s of waiting", time.Since(began).Round(time.Second))
			}
			return i > 0
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			tb.Logf("checking the fixture build lock %s: %v", path, err)
			return false
		}
		if i == 0 {
			tb.Logf("hack/build-fixtures.sh is building the API server fixtures (lock %s); waiting up to %s", path, time.Until(deadline).Round(time.Second))
		}
		if time.Now().After(deadline) {
			tb.Logf("gave up waiting for the fixture build after %s", time.Since(began).Round(time.Second))
			return false
		}
		if time.Since(lastLog) >= time.Minute {
			tb.Logf("still waiting for the fixture build (%s so far)", time.Since(began).Round(time.Second))
			lastLog = time.Now()
		}
		time.Sleep(interval)
	}
}
