package proxy

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

const managerNode = "test-node"

func makeNode(mods ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: managerNode}}
	for _, m := range mods {
		m(n)
	}
	return n
}

func withIPs(addrs ...string) func(*v1.Node) {
	return func(n *v1.Node) {
		for _, a := range addrs {
			typ := v1.NodeInternalIP
			if strings.HasPrefix(a, "ext:") {
				typ, a = v1.NodeExternalIP, strings.TrimPrefix(a, "ext:")
			}
			n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: typ, Address: a})
		}
	}
}

func withPodCIDRs(c ...string) func(*v1.Node) {
	return func(n *v1.Node) { n.Spec.PodCIDRs = c }
}

type exitRecorder struct {
	mu    sync.Mutex
	codes []int
}

func (e *exitRecorder) exit(code int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.codes = append(e.codes, code)
}

func (e *exitRecorder) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.codes)
}

func ipStrings(ips []net.IP) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

func TestNewNodeManager(t *testing.T) {
	tests := []struct {
		name          string
		node          *v1.Node
		watchPodCIDRs bool
		wantErr       string
		wantIPs       []string
		wantCIDRs     []string
		wantNode      bool
	}{
		{name: "node does not exist"},
		{name: "node does not exist, watching PodCIDRs", watchPodCIDRs: true, wantErr: "timeout waiting for node"},
		{name: "node without IPs", node: makeNode(), wantNode: true},
		{name: "node with IPs", node: makeNode(withIPs("192.168.1.1", "fd00::1")), wantNode: true, wantIPs: []string{"192.168.1.1", "fd00::1"}},
		{name: "watching PodCIDRs, node has none", node: makeNode(withIPs("192.168.1.1")), watchPodCIDRs: true, wantErr: "timeout waiting for PodCIDR"},
		{name: "watching PodCIDRs, node has them", node: makeNode(withIPs("192.168.1.1"), withPodCIDRs("10.0.0.0/24", "fd00:10::/64")), watchPodCIDRs: true,
			wantNode: true, wantIPs: []string{"192.168.1.1"}, wantCIDRs: []string{"10.0.0.0/24", "fd00:10::/64"}},
		{name: "watching PodCIDRs, node has CIDRs but no IPs", node: makeNode(withPodCIDRs("10.0.0.0/24")), watchPodCIDRs: true,
			wantNode: true, wantCIDRs: []string{"10.0.0.0/24"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tc.node != nil {
				if _, err := client.CoreV1().Nodes().Create(context.Background(), tc.node, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ex := &exitRecorder{}
			nm, err := newNodeManager(ctx, client, 30*time.Second, managerNode, tc.watchPodCIDRs, ex.exit,
				10*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ipStrings(nm.NodeIPs()); !slices.Equal(got, tc.wantIPs) {
				t.Errorf("NodeIPs = %v, want %v", got, tc.wantIPs)
			}
			if got := nm.PodCIDRs(); !slices.Equal(got, tc.wantCIDRs) {
				t.Errorf("PodCIDRs = %v, want %v", got, tc.wantCIDRs)
			}
			if (nm.Node() != nil) != tc.wantNode {
				t.Errorf("Node() = %v, want present=%v", nm.Node(), tc.wantNode)
			}
			if nm.NodeInformer() == nil {
				t.Error("NodeInformer() is nil")
			}
			if ex.count() != 0 {
				t.Errorf("exit called during construction")
			}
		})
	}
}

func TestNodeManagerWaitsForIPs(t *testing.T) {
	client := fake.NewClientset()
	if _, err := client.CoreV1().Nodes().Create(context.Background(), makeNode(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = client.CoreV1().Nodes().Update(context.Background(), makeNode(withIPs("192.168.1.9")), metav1.UpdateOptions{})
	}()
	nm, err := newNodeManager(context.Background(), client, 30*time.Second, managerNode, false, (&exitRecorder{}).exit,
		10*time.Millisecond, 10*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := ipStrings(nm.NodeIPs()); !slices.Equal(got, []string{"192.168.1.9"}) {
		t.Errorf("NodeIPs = %v, want the IP assigned after startup", got)
	}
}

func TestNodeManagerOnNodeChange(t *testing.T) {
	tests := []struct {
		name          string
		initial       *v1.Node
		watchPodCIDRs bool
		update        *v1.Node
		wantExit      bool
	}{
		{name: "same IPs", initial: makeNode(withIPs("192.168.1.1")), update: makeNode(withIPs("192.168.1.1")), wantExit: false},
		{name: "same IPs, other address types and labels change", initial: makeNode(withIPs("192.168.1.1")),
			update: makeNode(withIPs("192.168.1.1", "ext:1.2.3.4"), func(n *v1.Node) { n.Labels = map[string]string{"a": "b"} }), wantExit: false},
		{name: "different IPs", initial: makeNode(withIPs("192.168.1.1")), update: makeNode(withIPs("192.168.1.2")), wantExit: true},
		{name: "IPs gone", initial: makeNode(withIPs("192.168.1.1")), update: makeNode(), wantExit: true},
		{name: "second family added", initial: makeNode(withIPs("192.168.1.1")), update: makeNode(withIPs("192.168.1.1", "fd00::1")), wantExit: true},
		{name: "watching PodCIDRs, same", initial: makeNode(withIPs("192.168.1.1"), withPodCIDRs("10.0.0.0/24")), watchPodCIDRs: true,
			update: makeNode(withIPs("192.168.1.1"), withPodCIDRs("10.0.0.0/24")), wantExit: false},
		{name: "watching PodCIDRs, changed", initial: makeNode(withIPs("192.168.1.1"), withPodCIDRs("10.0.0.0/24")), watchPodCIDRs: true,
			update: makeNode(withIPs("192.168.1.1"), withPodCIDRs("10.0.1.0/24")), wantExit: true},
		{name: "not watching PodCIDRs, changed", initial: makeNode(withIPs("192.168.1.1"), withPodCIDRs("10.0.0.0/24")),
			update: makeNode(withIPs("192.168.1.1"), withPodCIDRs("10.0.1.0/24")), wantExit: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.initial)
			ex := &exitRecorder{}
			nm, err := newNodeManager(context.Background(), client, 30*time.Second, managerNode, tc.watchPodCIDRs, ex.exit,
				10*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			nm.OnNodeChange(tc.update)
			if got := ex.count() > 0; got != tc.wantExit {
				t.Errorf("exited = %v, want %v", got, tc.wantExit)
			}
			if ex.count() > 1 {
				t.Errorf("exit called %d times", ex.count())
			}
			if got := nm.Node(); got == nil || !slices.Equal(got.Spec.PodCIDRs, tc.update.Spec.PodCIDRs) {
				t.Errorf("Node() does not reflect the update: %v", got)
			}
		})
	}
}

func TestNodeManagerOnNodeDelete(t *testing.T) {
	client := fake.NewClientset(makeNode(withIPs("192.168.1.1")))
	ex := &exitRecorder{}
	nm, err := newNodeManager(context.Background(), client, 30*time.Second, managerNode, false, ex.exit,
		10*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	nm.OnNodeSynced()
	nm.OnNodeDelete(makeNode())
	if ex.count() != 1 {
		t.Errorf("exit called %d times on delete, want 1", ex.count())
	}
}

func TestNodeManagerZeroValue(t *testing.T) {
	// Third parties use new(NodeManager) as a plain node holder.
	nm := new(NodeManager)
	if nm.Node() != nil || nm.NodeIPs() != nil || nm.PodCIDRs() != nil || nm.NodeInformer() != nil {
		t.Fatal("zero value is not empty")
	}
	n := makeNode(withIPs("192.168.1.1"), withPodCIDRs("10.0.0.0/24"))
	nm.OnNodeChange(n)
	nm.OnNodeChange(makeNode(withIPs("192.168.1.2")))
	nm.OnNodeChange(nil)
	nm.OnNodeSynced()
	got := nm.Node()
	if got == nil || got.Status.Addresses[0].Address != "192.168.1.2" {
		t.Fatalf("Node() = %v, want the last node seen", got)
	}
	got.Name = "mutated"
	if nm.Node().Name != managerNode {
		t.Error("Node() must return a copy")
	}
	// A deleted node is no longer eligible for traffic; it must not linger.
	nm.OnNodeDelete(n)
	if got := nm.Node(); got != nil {
		t.Errorf("Node() after OnNodeDelete = %v, want nil", got.Name)
	}
	nm.OnNodeChange(n)
	if nm.Node() == nil {
		t.Error("a node re-added after deletion must be served again")
	}
}

func TestGetNodeHostIPs(t *testing.T) {
	tests := []struct {
		name    string
		node    *v1.Node
		want    []string
		wantErr bool
	}{
		{name: "no addresses", node: makeNode(), wantErr: true},
		{name: "only invalid", node: makeNode(withIPs("bogus")), wantErr: true},
		{name: "nil", node: nil, wantErr: true},
		{name: "internal preferred over external", node: makeNode(withIPs("ext:1.2.3.4", "10.0.0.1")), want: []string{"10.0.0.1"}},
		{name: "external when no internal", node: makeNode(withIPs("ext:1.2.3.4")), want: []string{"1.2.3.4"}},
		{name: "dual-stack internal", node: makeNode(withIPs("10.0.0.1", "10.0.0.2", "fd00::1", "fd00::2")), want: []string{"10.0.0.1", "fd00::1"}},
		{name: "IPv6 primary", node: makeNode(withIPs("fd00::1", "10.0.0.1")), want: []string{"fd00::1", "10.0.0.1"}},
		{name: "secondary family from external", node: makeNode(withIPs("10.0.0.1", "ext:2001:db8::1")), want: []string{"10.0.0.1", "2001:db8::1"}},
		{name: "hostname addresses ignored", node: makeNode(func(n *v1.Node) {
			n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: "host"}, {Type: v1.NodeInternalIP, Address: "10.0.0.1"}}
		}), want: []string{"10.0.0.1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GetNodeHostIPs(tc.node)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !slices.Equal(ipStrings(got), tc.want) {
				t.Errorf("got %v, want %v", ipStrings(got), tc.want)
			}
		})
	}
}

func TestNewNodeManagerPublic(t *testing.T) {
	if _, err := NewNodeManager(context.Background(), nil, "n", nil); err == nil {
		t.Error("want an error without client and config")
	}
	client := fake.NewClientset(makeNode(withIPs("10.0.0.1"), withPodCIDRs("10.1.0.0/24")))
	cfg := &kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: kubeproxyconfig.LocalModeNodeCIDR}
	cfg.ConfigSyncPeriod.Duration = time.Minute
	nm, err := NewNodeManager(context.Background(), client, managerNode, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !nm.watchPodCIDRs || !slices.Equal(nm.PodCIDRs(), []string{"10.1.0.0/24"}) {
		t.Errorf("NodeCIDR mode must watch PodCIDRs; got watch=%v cidrs=%v", nm.watchPodCIDRs, nm.PodCIDRs())
	}
}

// A static source (manifests) is complete once synced: NewStaticNodeManager
// reaches NewNodeManager's outcomes without its waits.
func TestNewStaticNodeManager(t *testing.T) {
	for _, tc := range []struct {
		name    string
		node    *v1.Node
		mode    kubeproxyconfig.LocalMode
		wantErr string
		wantIPs []string
	}{
		{name: "node does not exist"},
		{name: "node does not exist, NodeCIDR", mode: kubeproxyconfig.LocalModeNodeCIDR,
			wantErr: `node "test-node" does not exist, and detect-local-mode NodeCIDR needs its spec.podCIDRs`},
		{name: "node without PodCIDRs, NodeCIDR", node: makeNode(withIPs("192.168.1.1")), mode: kubeproxyconfig.LocalModeNodeCIDR,
			wantErr: `node "test-node" has no spec.podCIDRs`},
		{name: "node without IPs", node: makeNode()},
		{name: "node with IPs", node: makeNode(withIPs("192.168.1.1")), wantIPs: []string{"192.168.1.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tc.node != nil {
				if _, err := client.CoreV1().Nodes().Create(context.Background(), tc.node, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			cfg := &kubeproxyconfig.KubeProxyConfiguration{DetectLocalMode: tc.mode}
			start := time.Now()
			nm, err := NewStaticNodeManager(context.Background(), client, managerNode, cfg)
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("took %v; a static source has nothing to wait for", elapsed)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ipStrings(nm.NodeIPs()); !slices.Equal(got, tc.wantIPs) {
				t.Errorf("NodeIPs = %v, want %v", got, tc.wantIPs)
			}
		})
	}
}
