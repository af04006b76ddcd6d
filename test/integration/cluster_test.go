//go:build linux

package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"k8s.io/kube-proxy/test/kubeapiserver"
)

// cluster writes the objects of one test through the API as the administrator, in a
// namespace of its own, and deletes its Services and EndpointSlices afterwards (there
// is no namespace controller to do it).
type cluster struct {
	t     *testing.T
	ctx   context.Context
	admin kubernetes.Interface
	ns    string
	node  string
}

func newCluster(t *testing.T, srv *kubeapiserver.Server, namespace, node string) *cluster {
	t.Helper()
	admin, err := srv.Client(kubeapiserver.Admin)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, ctx: ctxFor(t), admin: admin, ns: namespace, node: node}
	if _, err := admin.CoreV1().Namespaces().Create(c.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("namespace %s: %v", namespace, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if svcs, err := admin.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{}); err == nil {
			for _, svc := range svcs.Items {
				_ = admin.CoreV1().Services(namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{})
			}
		}
		_ = admin.DiscoveryV1().EndpointSlices(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = admin.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
	})
	return c
}

// createNode registers this test's node with an InternalIP, as a kubelet would.
func (c *cluster) createNode(ip string) {
	c.t.Helper()
	n, err := c.admin.CoreV1().Nodes().Create(c.ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: c.node, Labels: map[string]string{v1.LabelHostname: c.node},
	}}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("node %s: %v", c.node, err)
	}
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}, {Type: v1.NodeHostName, Address: c.node}}
	if _, err := c.admin.CoreV1().Nodes().UpdateStatus(c.ctx, n, metav1.UpdateOptions{}); err != nil {
		c.t.Fatalf("node %s status: %v", c.node, err)
	}
}

// createService makes a Service with one TCP port "http" (port → 8080); mutate may
// change it before it is sent. It returns what the server allocated.
func (c *cluster) createService(name string, port int32, mutate func(*v1.Service)) *v1.Service {
	c.t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns},
		Spec: v1.ServiceSpec{
			Ports: []v1.ServicePort{{Name: "http", Port: port, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if mutate != nil {
		mutate(svc)
	}
	created, err := c.admin.CoreV1().Services(c.ns).Create(c.ctx, svc, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("service %s/%s: %v", c.ns, name, err)
	}
	return created
}

// setEndpoints creates or replaces the Service's one EndpointSlice: ready endpoints on
// this test's node, port "http" 8080.
func (c *cluster) setEndpoints(svcName string, ips ...string) {
	c.t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: svcName + "-1", Namespace: c.ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: svcName, discoveryv1.LabelManagedBy: "kube-proxy-integration-test"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, ip := range ips {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(c.node),
		})
	}
	slices := c.admin.DiscoveryV1().EndpointSlices(c.ns)
	old, err := slices.Get(c.ctx, slice.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = slices.Create(c.ctx, slice, metav1.CreateOptions{})
	case err == nil:
		slice.ResourceVersion = old.ResourceVersion
		_, err = slices.Update(c.ctx, slice, metav1.UpdateOptions{})
	}
	if err != nil {
		c.t.Fatalf("endpoint slice %s/%s: %v", c.ns, slice.Name, err)
	}
}

// setLoadBalancerIP writes status.loadBalancer.ingress, as a cloud controller would.
func (c *cluster) setLoadBalancerIP(svcName, ip string) {
	c.t.Helper()
	svc, err := c.admin.CoreV1().Services(c.ns).Get(c.ctx, svcName, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip, IPMode: ptr.To(v1.LoadBalancerIPModeVIP)}}
	if _, err := c.admin.CoreV1().Services(c.ns).UpdateStatus(c.ctx, svc, metav1.UpdateOptions{}); err != nil {
		c.t.Fatalf("load balancer status of %s/%s: %v", c.ns, svcName, err)
	}
}

func (c *cluster) deleteService(name string) {
	c.t.Helper()
	if err := c.admin.CoreV1().Services(c.ns).Delete(c.ctx, name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatalf("deleting service %s/%s: %v", c.ns, name, err)
	}
	err := c.admin.DiscoveryV1().EndpointSlices(c.ns).Delete(c.ctx, name+"-1", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		c.t.Fatalf("deleting endpoint slice %s/%s-1: %v", c.ns, name, err)
	}
}

// Addresses of the node and pod namespaces (198.18.0.0/15 is for tests).
const (
	nodeIP = "198.18.1.1"
	podA   = "198.18.1.2"
	podB   = "198.18.1.3"
)

// newPodNet gives the node namespace a veth to a "pod" namespace that holds podA and
// podB, each serving HTTP on 8080 with its own address as the body, and makes the pod
// namespace the node's default route (so ClusterIPs have a route before DNAT).
func newPodNet(t *testing.T, node *netNS) *netNS {
	t.Helper()
	pod := newNetNS(t, "kp-pod-")
	if out, err := runCmd("ip", "-n", node.name, "link", "add", "veth0", "type", "veth", "peer", "name", "eth0", "netns", pod.name); err != nil {
		t.Skipf("needs veth interfaces: %v\n%s", err, out)
	}
	mustRun(t, "ip", "-n", node.name, "addr", "add", nodeIP+"/24", "dev", "veth0")
	mustRun(t, "ip", "-n", node.name, "link", "set", "veth0", "up")
	mustRun(t, "ip", "-n", node.name, "route", "add", "default", "via", podA)
	mustRun(t, "ip", "-n", pod.name, "addr", "add", podA+"/24", "dev", "eth0")
	mustRun(t, "ip", "-n", pod.name, "addr", "add", podB+"/24", "dev", "eth0")
	mustRun(t, "ip", "-n", pod.name, "link", "set", "eth0", "up")
	mustRun(t, "ip", "-n", pod.name, "route", "add", "default", "via", nodeIP)
	for _, ip := range []string{podA, podB} {
		l, err := pod.listen("tcp", net.JoinHostPort(ip, "8080"))
		if err != nil {
			t.Fatalf("pod listener on %s: %v", ip, err)
		}
		body := ip
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/source" {
				// Who the pod saw connecting: tells masquerading from source preservation.
				host, _, _ := net.SplitHostPort(r.RemoteAddr)
				fmt.Fprint(w, host)
				return
			}
			fmt.Fprint(w, body)
		})}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	return pod
}

// Addresses of the link between the node and an external client. They are outside
// kube-proxy's --cluster-cidr (198.18.0.0/16), so the client is not taken for a pod.
const (
	nodeExternalIP = "198.19.0.1"
	clientIP       = "198.19.0.2"
)

// newClientNet gives the node a second veth, to a namespace standing for a client outside
// the cluster (a load balancer forwarding with the VIP kept as destination), whose
// default route is the node. The node forwards between its links, as nodes do.
func newClientNet(t *testing.T, node *netNS) *netNS {
	t.Helper()
	client := newNetNS(t, "kp-client-")
	if out, err := runCmd("ip", "-n", node.name, "link", "add", "veth1", "type", "veth", "peer", "name", "eth0", "netns", client.name); err != nil {
		t.Skipf("needs veth interfaces: %v\n%s", err, out)
	}
	mustRun(t, "ip", "-n", node.name, "addr", "add", nodeExternalIP+"/24", "dev", "veth1")
	mustRun(t, "ip", "-n", node.name, "link", "set", "veth1", "up")
	mustRun(t, "ip", "netns", "exec", node.name, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	mustRun(t, "ip", "-n", client.name, "addr", "add", clientIP+"/24", "dev", "eth0")
	mustRun(t, "ip", "-n", client.name, "link", "set", "eth0", "up")
	mustRun(t, "ip", "-n", client.name, "route", "add", "default", "via", nodeExternalIP)
	return client
}

// ruleset is everything kube-proxy may have programmed in the namespace.
func ruleset(ns *netNS) string {
	var b strings.Builder
	for _, cmd := range [][]string{{"iptables-save"}, {"nft", "list", "ruleset"}} {
		out, _ := ns.exec(cmd...)
		b.WriteString(out)
	}
	return b.String()
}

// hasIP reports whether ip appears in s as a whole address (10.96.0.1 is not in 10.96.0.10).
func hasIP(s, ip string) bool {
	return regexp.MustCompile(`(^|[^0-9.])` + regexp.QuoteMeta(ip) + `([^0-9]|$)`).MatchString(s)
}
