//go:build linux

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/kube-proxy/test/kubeapiserver"
)

// kube-proxy running as an identity without its RBAC permissions says why, is not
// healthy, keeps running, and recovers once the permissions are granted.
func TestRBACDenied(t *testing.T) {
	requireEnv(t)
	srv := shared(t)
	node := newProxyNode(t, srv, kubeapiserver.Unprivileged)
	c := newCluster(t, srv, "rbac", "node-rbac")
	c.createNode(nodeIP)
	web := c.createService("web", 80, nil)
	c.setEndpoints("web", podA)

	kp := startKubeProxy(t, node.ns, node.kubeconfig, "nftables", c.node)
	user := kubeapiserver.Unprivileged.UserName()
	eventually(t, "a forbidden error naming the user", 60*time.Second, func() bool {
		out := kp.out.String()
		return strings.Contains(out, "forbidden") && strings.Contains(out, user)
	}, func() string { return lastLines(kp.out.String(), 30) })
	t.Logf("kube-proxy says: %s", firstLine(grepLines(kp.out.String(), "forbidden")))

	// Give it time to crash if it were going to.
	time.Sleep(5 * time.Second)
	if !kp.running() {
		t.Fatalf("kube-proxy exited on RBAC denial: %v\n%s", kp.err, lastLines(kp.out.String(), 40))
	}
	code, body, err := node.ns.get("http://" + healthzAddr + "/healthz")
	if code == 200 {
		t.Errorf("/healthz is healthy without permissions: %q", body)
	}
	t.Logf("/healthz without permissions: code %d, %v", code, errString(err))
	// The metrics server's /healthz/apiserver probes a Service list as well as /version,
	// so it names the denial (its /healthz, like upstream's, only says the process serves).
	eventually(t, "the metrics /healthz/apiserver to report the RBAC denial", 30*time.Second, func() bool {
		mcode, mbody, _ := node.ns.get("http://" + metricsAddr + "/healthz/apiserver")
		return mcode == 503 && strings.Contains(mbody, "refuses kube-proxy's requests")
	}, func() string {
		mcode, mbody, merr := node.ns.get("http://" + metricsAddr + "/healthz/apiserver")
		return fmt.Sprintf("code %d %q %v", mcode, mbody, errString(merr))
	})
	if hasIP(ruleset(node.ns), web.Spec.ClusterIP) {
		t.Errorf("rules for %s programmed without permission to read Services", web.Spec.ClusterIP)
	}

	// Grant kube-proxy's role: the same process recovers.
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "it-grant-node-proxier"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-proxier"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := c.admin.RbacV1().ClusterRoleBindings().Create(c.ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.admin.RbacV1().ClusterRoleBindings().Delete(c.ctx, binding.Name, metav1.DeleteOptions{})
	})
	eventually(t, "traffic once the permissions are granted", 90*time.Second, func() bool {
		if !kp.running() {
			t.Fatalf("kube-proxy exited: %v\n%s", kp.err, lastLines(kp.out.String(), 40))
		}
		return node.fetch(web.Spec.ClusterIP, 80) == podA
	}, func() string { return lastLines(kp.out.String(), 30) })
	eventually(t, "/healthz once the permissions are granted", 30*time.Second, func() bool {
		code, _, _ := node.ns.get("http://" + healthzAddr + "/healthz")
		return code == 200
	}, func() string {
		code, body, err := node.ns.get("http://" + healthzAddr + "/healthz")
		return fmt.Sprintf("%d %q %s", code, body, errString(err))
	})
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
