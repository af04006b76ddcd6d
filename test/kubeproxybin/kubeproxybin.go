// Package kubeproxybin builds this repository's kube-proxy binary for tests that run it
// as a process (cmd/kube-proxy, test/e2e, test/integration). It is part of the root module
// but only for tests, and imports only the standard library.
package kubeproxybin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var (
	once sync.Once
	dir  string
	path string
	err  error
)

// Path returns the kube-proxy binary, built from k8s.io/kube-proxy/cmd/kube-proxy the
// first time a test of this process asks; a build failure fails every test that asks.
//
// The build is static (CGO_ENABLED=0), as CI's vet, test/vm and the conformance cluster
// build it: the tests themselves run with -race, which needs cgo, and cgo changes the
// cache key of every package above net, so a build that inherited it would compile the
// whole dependency tree a second time.
func Path(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		dir, err = os.MkdirTemp("", "kube-proxy-bin-")
		if err != nil {
			return
		}
		path = filepath.Join(dir, "kube-proxy")
		began := time.Now()
		cmd := exec.Command("go", "build", "-o", path, "k8s.io/kube-proxy/cmd/kube-proxy")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, buildErr := cmd.CombinedOutput(); buildErr != nil {
			err = fmt.Errorf("go build k8s.io/kube-proxy/cmd/kube-proxy: %w\n%s", buildErr, out)
			return
		}
		t.Logf("built kube-proxy in %s", time.Since(began).Round(time.Millisecond))
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// Remove deletes the binary, if one was built. TestMain calls it after m.Run.
func Remove() {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}
