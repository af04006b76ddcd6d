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

// A running kube-proxy outlives its API server: a crash and restart of the server, and a
// network partition during which the cluster changes. Rules stay while the server is
// away, the watches resume afterwards, and what changed meanwhile is applied.
func TestAPIServerOutages(t *testing.T) {
	requireEnv(t)
	// Its own server: the test kills and restarts it.
	srv := kubeapiserver.Start(t, kubeapiserver.Options{})
	kubeProxyBinary(t)
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) { testOutages(t, srv, mode) })
	}
}

func testOutages(t *testing.T, srv *kubeapiserver.Server, mode string) {
	node := newProxyNode(t, srv, kubeapiserver.KubeProxy)
	c := newCluster(t, srv, "outage-"+mode, "node-outage-"+mode)
	c.createNode(nodeIP)
	web := c.createService("web", 80, nil)
	c.setEndpoints("web", podA)
	webIP := web.Spec.ClusterIP

	kp := startKubeProxy(t, node.ns, node.kubeconfig, mode, c.node)
	alive := func() {
		t.Helper()
		if !kp.running() {
			t.Fatalf("kube-proxy exited: %v\n%s", kp.err, lastLines(kp.out.String(), 40))
		}
	}
	waitBody := func(what, ip string, port int32, want string) {
		t.Helper()
		eventually(t, what, 45*time.Second, func() bool {
			alive()
			return node.fetch(ip, port) == want
		}, func() string { return node.fetch(ip, port) + "\n" + lastLines(kp.out.String(), 30) })
	}
	apiHealthz := func() int {
		code, _, _ := node.ns.get("http://" + metricsAddr + "/healthz")
		return code
	}
	waitBody("first traffic to web", webIP, 80, podA)
	before := ruleset(node.ns)

	// 1. The API server crashes.
	srv.Kill()
	// The proxy notices (its metrics server's /healthz reports the API server) ...
	eventually(t, "the metrics /healthz to report the API server down", 30*time.Second, func() bool {
		alive()
		return apiHealthz() == 503
	}, func() string {
		_, body, err := node.ns.get("http://" + metricsAddr + "/healthz")
		return body + " " + errString(err)
	})
	// ... but keeps serving: the rules stay and traffic flows.
	if got := node.fetch(webIP, 80); got != podA {
		t.Errorf("traffic to web during the outage: %q, want %q", got, podA)
	}
	if after := ruleset(node.ns); !hasIP(after, webIP) {
		t.Errorf("rules for web gone during the outage; before:\n%s\nnow:\n%s", before, after)
	}
	if code, _, _ := node.ns.get("http://" + healthzAddr + "/healthz"); code != 200 {
		t.Errorf("/healthz during an outage without pending changes: %d, want 200 (nothing is out of date)", code)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the metrics /healthz to recover", 45*time.Second, func() bool {
		alive()
		return apiHealthz() == 200
	}, func() string {
		_, body, err := node.ns.get("http://" + metricsAddr + "/healthz")
		return body + " " + errString(err)
	})
	// The watches resumed: changes after the restart are applied.
	c.setEndpoints("web", podB)
	waitBody("traffic to follow an endpoint change after the restart", webIP, 80, podB)
	late := c.createService("late", 84, nil)
	c.setEndpoints("late", podA)
	waitBody("traffic to a Service created after the restart", late.Spec.ClusterIP, 84, podA)

	// 2. A partition: the proxy loses the API server while the cluster changes.
	node.relay.setCut(true)
	c.setEndpoints("web", podA)
	c.deleteService("late")
	during := c.createService("during", 85, nil)
	c.setEndpoints("during", podB)
	// Nothing of that can reach the proxy: the old rules keep working.
	time.Sleep(2 * time.Second)
	alive()
	if got := node.fetch(webIP, 80); got != podB {
		t.Errorf("traffic to web while partitioned: %q, want the old endpoint %q", got, podB)
	}
	if got := node.fetch(late.Spec.ClusterIP, 84); got != podA {
		t.Errorf("traffic to late while partitioned: %q, want the old endpoint %q", got, podA)
	}
	node.relay.setCut(false)
	waitBody("the endpoint change made during the partition", webIP, 80, podA)
	waitBody("the Service created during the partition", during.Spec.ClusterIP, 85, podB)
	eventually(t, "the Service deleted during the partition to go", 45*time.Second, func() bool {
		return !hasIP(ruleset(node.ns), late.Spec.ClusterIP)
	}, func() string { return ruleset(node.ns) })
	alive()
	if code, body, err := node.ns.get("http://" + healthzAddr + "/healthz"); code != 200 {
		t.Errorf("/healthz after the outages: %d %q %v", code, body, err)
	}
}

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
	// The metrics server's /healthz probes a Service list as well as /version, so it
	// names the denial instead of looking healthy.
	eventually(t, "the metrics /healthz to report the RBAC denial", 30*time.Second, func() bool {
		mcode, mbody, _ := node.ns.get("http://" + metricsAddr + "/healthz")
		return mcode == 503 && strings.Contains(mbody, "refuses kube-proxy's requests")
	}, func() string {
		mcode, mbody, merr := node.ns.get("http://" + metricsAddr + "/healthz")
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
