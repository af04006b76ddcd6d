//go:build linux

package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/kube-proxy/test/kubeapiserver"
	"k8s.io/kube-proxy/test/kubeproxybin"
)

// The drop-in binary with kube-proxy's own identity (system:node-proxier RBAC) against a
// real API server: rules for every Service type, real traffic through them, updates
// and deletes, /healthz, /metrics, the birth-cry event and ServiceCIDRs.
func TestKubeProxyBinary(t *testing.T) {
	requireEnv(t)
	srv := shared(t)
	kubeproxybin.Path(t)
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) { testBinary(t, srv, mode) })
	}
}

// proxyNode is a node namespace with its pod network, reaching the API server through
// a relay, with a kubeconfig for identity id.
type proxyNode struct {
	ns         *netNS
	pod        *netNS
	client     *netNS
	relay      *relay
	kubeconfig string
}

func newProxyNode(t *testing.T, srv *kubeapiserver.Server, id kubeapiserver.Identity) *proxyNode {
	t.Helper()
	n := &proxyNode{ns: newNetNS(t, "kp-node-")}
	n.pod = newPodNet(t, n.ns)
	n.client = newClientNet(t, n.ns)
	// Same address and port inside the namespace as on the host: the serving
	// certificate is for 127.0.0.1.
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Port()))
	n.relay = startRelay(t, n.ns, addr, addr)
	n.kubeconfig = filepath.Join(t.TempDir(), string(id)+".kubeconfig")
	if err := srv.WriteKubeconfig(id, "https://"+addr, n.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return n
}

// fetch GETs host:port from the node namespace and returns the body, or the error text.
func (n *proxyNode) fetch(host string, port int32) string {
	code, body, err := n.ns.get(fmt.Sprintf("http://%s/", net.JoinHostPort(host, strconv.Itoa(int(port)))))
	if err != nil {
		return "error: " + err.Error()
	}
	if code != 200 {
		return fmt.Sprintf("status %d: %s", code, body)
	}
	return body
}

// fetchFrom GETs path on host:port from namespace ns and returns the body, or the error text.
func fetchFrom(ns *netNS, host string, port int32, path string) string {
	code, body, err := ns.get(fmt.Sprintf("http://%s%s", net.JoinHostPort(host, strconv.Itoa(int(port))), path))
	if err != nil {
		return "error: " + err.Error()
	}
	if code != 200 {
		return fmt.Sprintf("status %d: %s", code, body)
	}
	return body
}

// refused reports whether a TCP connect from the node namespace is actively rejected,
// as kube-proxy does for Services without endpoints and for unused ClusterIP ports.
func (n *proxyNode) refused(host string, port int32) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := n.ns.dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func testBinary(t *testing.T, srv *kubeapiserver.Server, mode string) {
	node := newProxyNode(t, srv, kubeapiserver.KubeProxy)
	c := newCluster(t, srv, "it-"+mode, "node-"+mode)
	c.createNode(nodeIP)

	web := c.createService("web", 80, nil)
	c.setEndpoints("web", podA)
	np := c.createService("np", 81, func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort })
	c.setEndpoints("np", podB)
	lb := c.createService("lb", 82, func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	})
	c.setEndpoints("lb", podA)
	c.setLoadBalancerIP("lb", "198.18.200.1")
	empty := c.createService("empty", 83, nil)
	webIP, npIP, emptyIP := web.Spec.ClusterIP, np.Spec.ClusterIP, empty.Spec.ClusterIP
	nodePort := np.Spec.Ports[0].NodePort
	hcPort := lb.Spec.HealthCheckNodePort
	if nodePort == 0 || hcPort == 0 {
		t.Fatalf("the API server allocated no node port (%d) or health check node port (%d)", nodePort, hcPort)
	}

	began := time.Now()
	kp := startKubeProxy(t, node.ns, node.kubeconfig, mode, c.node)
	alive := func() {
		if !kp.running() {
			t.Fatalf("kube-proxy exited: %v\n%s", kp.err, lastLines(kp.out.String(), 40))
		}
	}
	rules := func() string { return ruleset(node.ns) }
	eventually(t, "traffic to the ClusterIP of web", 90*time.Second, func() bool {
		alive()
		return node.fetch(webIP, 80) == podA
	}, func() string { return node.fetch(webIP, 80) + "\n" + lastLines(kp.out.String(), 30) })
	t.Logf("%s: first traffic through the ClusterIP %s after %s", mode, time.Since(began).Round(time.Millisecond), webIP)

	if got := node.fetch(nodeIP, nodePort); got != podB {
		t.Errorf("NodePort %s:%d gave %q, want %q", nodeIP, nodePort, got, podB)
	}
	if got := node.fetch(npIP, 81); got != podB {
		t.Errorf("ClusterIP of np gave %q, want %q", got, podB)
	}
	// From outside the cluster: a NodePort under Cluster policy is masqueraded to the
	// node's address; a load balancer VIP under Local policy keeps the client's address.
	if got := fetchFrom(node.client, nodeIP, nodePort, "/"); got != podB {
		t.Errorf("NodePort %s:%d from an external client gave %q, want %q", nodeIP, nodePort, got, podB)
	}
	if got := fetchFrom(node.client, nodeIP, nodePort, "/source"); got != nodeIP {
		t.Errorf("the endpoint of NodePort %d (externalTrafficPolicy Cluster) saw the client as %q, want the node's %s", nodePort, got, nodeIP)
	}
	eventually(t, "traffic from an external client to the load balancer VIP", 30*time.Second, func() bool {
		return fetchFrom(node.client, "198.18.200.1", 82, "/") == podA
	}, func() string { return fetchFrom(node.client, "198.18.200.1", 82, "/") + "\n" + ruleset(node.ns) })
	if got := fetchFrom(node.client, "198.18.200.1", 82, "/source"); got != clientIP {
		t.Errorf("the endpoint of the load balancer (externalTrafficPolicy Local) saw the client as %q, want %s", got, clientIP)
	}
	if !node.refused(emptyIP, 83) {
		t.Errorf("a Service without endpoints (%s:83) is not rejected", emptyIP)
	}
	if r := rules(); !hasIP(r, "198.18.200.1") {
		t.Errorf("no rules for the load balancer IP 198.18.200.1:\n%s", r)
	}
	// externalTrafficPolicy: Local has a health check node port reporting local endpoints.
	code, body, err := node.ns.get(fmt.Sprintf("http://%s:%d/", nodeIP, hcPort))
	if err != nil || code != 200 || !strings.Contains(body, `"localEndpoints": 1`) {
		t.Errorf("health check node port %d: %d %q %v", hcPort, code, body, err)
	}

	code, body, err = node.ns.get("http://" + healthzAddr + "/healthz")
	if err != nil || code != 200 || !strings.Contains(body, "lastUpdated") {
		t.Errorf("/healthz: %d %q %v", code, body, err)
	}
	eventually(t, "sync metrics", 20*time.Second, func() bool {
		code, body, _ := node.ns.get("http://" + metricsAddr + "/metrics")
		return code == 200 && metricValue(body, `kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}`) > 0 &&
			metricValue(body, `kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"}`) >= 1
	}, func() string {
		_, body, _ := node.ns.get("http://" + metricsAddr + "/metrics")
		return grepLines(body, "kubeproxy_sync")
	})
	if code, body, err := node.ns.get("http://" + metricsAddr + "/healthz"); err != nil || code != 200 {
		t.Errorf("metrics server /healthz: %d %q %v", code, body, err)
	}

	// The birth cry, written with kube-proxy's own identity through events.k8s.io.
	eventually(t, "the Starting event", 30*time.Second, func() bool {
		events, err := c.admin.EventsV1().Events(metav1.NamespaceDefault).List(c.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range events.Items {
			if e.Reason == "Starting" && e.Action == "StartKubeProxy" && e.Regarding.Kind == "Node" &&
				e.Regarding.Name == c.node && e.ReportingController == "kube-proxy" {
				return true
			}
		}
		return false
	}, func() string { return "no event with reason Starting for node " + c.node })

	// Updates follow: endpoints move, the load balancer IP changes.
	changed := time.Now()
	c.setEndpoints("web", podB)
	eventually(t, "traffic to follow the endpoint change", 30*time.Second, func() bool {
		return node.fetch(webIP, 80) == podB
	}, func() string { return node.fetch(webIP, 80) })
	// Informational (polled every 200ms; the proxy's minimum sync interval is 100ms).
	t.Logf("%s: traffic followed an EndpointSlice update %s after the API call", mode, time.Since(changed).Round(time.Millisecond))
	c.setLoadBalancerIP("lb", "198.18.200.2")
	eventually(t, "rules to follow the load balancer IP", 30*time.Second, func() bool {
		r := rules()
		return hasIP(r, "198.18.200.2") && !hasIP(r, "198.18.200.1")
	}, rules)

	// Deletes follow.
	c.deleteService("np")
	eventually(t, "rules of the deleted Service to go", 30*time.Second, func() bool {
		return !hasIP(rules(), npIP)
	}, rules)
	if got := node.fetch(nodeIP, nodePort); got == podB {
		t.Errorf("the deleted NodePort %d still answers", nodePort)
	}

	if mode == "nftables" {
		testServiceCIDRs(t, c, node, webIP)
	}
	alive()
}

// nftables mode drops traffic to ClusterIPs nobody allocated, within the ranges of the
// cluster's ServiceCIDR objects, and follows new ones.
//
// A ServiceCIDR change by itself does not start a sync (upstream does not either); it is
// applied by the next one. So while waiting, the test keeps changing the endpoints of
// "web", as an ordinary cluster keeps changing.
func testServiceCIDRs(t *testing.T, c *cluster, node *proxyNode, webIP string) {
	check := func() string {
		out, _ := node.ns.exec("nft", "list", "chain", "ip", "kube-proxy", "cluster-ips-check")
		return out
	}
	nudges := 0
	nudge := func() {
		nudges++
		if nudges%2 == 0 {
			c.setEndpoints("web", podB)
		} else {
			c.setEndpoints("web", podA, podB)
		}
	}
	if r := check(); !strings.Contains(r, kubeapiserver.DefaultServiceClusterIPRange) {
		t.Errorf("cluster-ips-check lacks the default ServiceCIDR %s:\n%s", kubeapiserver.DefaultServiceClusterIPRange, r)
	}
	// An allocated ClusterIP on a port it does not serve is rejected; an unallocated
	// one in the range is dropped (the connect times out instead of being refused).
	if !node.refused(webIP, 9999) {
		t.Errorf("an unused port of the ClusterIP %s is not rejected", webIP)
	}
	if node.refused("10.96.255.254", 80) {
		t.Errorf("an unallocated ClusterIP is rejected rather than dropped")
	}

	// Not adjacent to the default range, which nft would merge with it in its listing.
	const extra = "10.100.0.0/24"
	_, err := c.admin.NetworkingV1().ServiceCIDRs().Create(c.ctx, &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "it-extra"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{extra}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("ServiceCIDR %s: %v", extra, err)
	}
	eventually(t, "the new ServiceCIDR in cluster-ips-check", 30*time.Second, func() bool {
		if strings.Contains(check(), extra) {
			return true
		}
		nudge()
		return false
	}, check)

	// Without the ServiceCIDR controller the deletion waits on its finalizer; remove
	// it as the controller would once no ClusterIP is left in the range.
	if err := c.admin.NetworkingV1().ServiceCIDRs().Delete(c.ctx, "it-extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sc, err := c.admin.NetworkingV1().ServiceCIDRs().Get(c.ctx, "it-extra", metav1.GetOptions{})
	if err == nil && len(sc.Finalizers) > 0 {
		sc.Finalizers = nil
		if _, err := c.admin.NetworkingV1().ServiceCIDRs().Update(c.ctx, sc, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("dropping the finalizer of ServiceCIDR it-extra: %v", err)
		}
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	eventually(t, "the deleted ServiceCIDR to leave cluster-ips-check", 30*time.Second, func() bool {
		if !strings.Contains(check(), extra) {
			return true
		}
		nudge()
		return false
	}, check)
}
