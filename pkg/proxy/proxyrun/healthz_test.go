package proxyrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"k8s.io/kube-proxy/pkg/proxy"
	fakebackend "k8s.io/kube-proxy/pkg/proxy/backend/testing"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/source"
	"k8s.io/kube-proxy/pkg/proxy/source/manifests"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// nodeFeed is one source under test and the way to change this node in it; set(nil)
// deletes the node.
type nodeFeed struct {
	src source.Source
	set func(t *testing.T, n *v1.Node)
}

func staticFeed(t *testing.T) nodeFeed {
	s := source.NewStatic()
	return nodeFeed{src: s, set: func(_ *testing.T, n *v1.Node) { s.SetNode(n) }}
}

func kubernetesFeed(t *testing.T) nodeFeed {
	client := fake.NewClientset()
	nodes := client.CoreV1().Nodes()
	return nodeFeed{src: source.NewKubernetes(client, node, 0), set: func(t *testing.T, n *v1.Node) {
		ctx := context.Background()
		var err error
		switch _, getErr := nodes.Get(ctx, node, metav1.GetOptions{}); {
		case n == nil:
			err = nodes.Delete(ctx, node, metav1.DeleteOptions{})
		case getErr != nil:
			_, err = nodes.Create(ctx, n, metav1.CreateOptions{})
		default:
			_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}}
}

func manifestFeed(t *testing.T) nodeFeed {
	dir := t.TempDir()
	file := filepath.Join(dir, "node.yaml")
	// Another node keeps the directory non-empty when this one goes.
	other, err := yaml.Marshal(st.Node("node-b", ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.yaml"), []byte("apiVersion: v1\nkind: Node\n"+string(other)), 0o644); err != nil {
		t.Fatal(err)
	}
	return nodeFeed{src: manifests.New(dir, node, 50*time.Millisecond), set: func(t *testing.T, n *v1.Node) {
		if n == nil {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			return
		}
		b, err := yaml.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		// Renamed into place, so the source applies it whole and at once.
		tmp := filepath.Join(t.TempDir(), "node.yaml")
		if err := os.WriteFile(tmp, []byte("apiVersion: v1\nkind: Node\n"+string(b)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}}
}

// freeAddr returns a loopback address with a port nothing listens on just now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

type healthz struct {
	code     int
	eligible *bool
	healthy  bool
}

func (h healthz) String() string {
	e := "unset"
	if h.eligible != nil {
		e = fmt.Sprint(*h.eligible)
	}
	return fmt.Sprintf("%d nodeEligible=%s healthy=%v", h.code, e, h.healthy)
}

func getHealthz(url string) (healthz, error) {
	resp, err := http.Get(url)
	if err != nil {
		return healthz{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return healthz{}, err
	}
	var h healthcheck.ProxyHealth
	if err := json.Unmarshal(body, &h); err != nil {
		return healthz{}, fmt.Errorf("decoding %q: %w", body, err)
	}
	return healthz{code: resp.StatusCode, eligible: h.NodeEligible, healthy: h.Healthy}, nil
}

// TestHealthzFollowsNode runs proxyrun with a real ProxyHealthServer over the documented
// &proxy.NodeManager{} and asks /healthz over HTTP, for every source: 503 until the Node
// is known, 200 while it is, 503 again once it is tainted for removal, being deleted, or
// gone.
func TestHealthzFollowsNode(t *testing.T) {
	for name, feed := range map[string]func(*testing.T) nodeFeed{
		"static": staticFeed, "kubernetes": kubernetesFeed, "manifests": manifestFeed,
	} {
		t.Run(name, func(t *testing.T) {
			f := feed(t)
			nodes := &proxy.NodeManager{}
			addr := freeAddr(t)
			hs := healthcheck.NewProxyHealthServer(addr, time.Minute, nodes)
			ctx, cancel := context.WithCancel(context.Background())
			hsDone := make(chan error, 1)
			go func() { hsDone <- hs.Run(ctx) }()
			runDone := make(chan error, 1)
			go func() {
				runDone <- Run(ctx, f.src, fakebackend.NewFullState(), Options{NodeName: node, Health: hs, Node: nodes})
			}()
			t.Cleanup(func() {
				cancel()
				if err := <-runDone; err != nil {
					t.Error(err)
				}
				if err := <-hsDone; err != nil {
					t.Error(err)
				}
			})

			yes, no := true, false
			expect := func(step string, want healthz) {
				t.Helper()
				var got healthz
				var err error
				for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					got, err = getHealthz("http://" + addr + "/healthz")
					if err == nil && got.String() == want.String() {
						return
					}
				}
				t.Fatalf("%s: /healthz = %v (err %v), want %v", step, got, err, want)
			}
			expect("no node yet", healthz{code: http.StatusServiceUnavailable, eligible: &no, healthy: true})
			f.set(t, st.Node(node, "z1"))
			expect("node known", healthz{code: http.StatusOK, eligible: &yes, healthy: true})
			tainted := st.Node(node, "z1")
			tainted.ResourceVersion = "2"
			tainted.Spec.Taints = []v1.Taint{{Key: healthcheck.ToBeDeletedTaint, Effect: v1.TaintEffectNoSchedule}}
			f.set(t, tainted)
			expect("node tainted for removal", healthz{code: http.StatusServiceUnavailable, eligible: &no, healthy: true})
			f.set(t, st.Node(node, "z1"))
			expect("taint removed", healthz{code: http.StatusOK, eligible: &yes, healthy: true})
			f.set(t, nil)
			expect("node deleted", healthz{code: http.StatusServiceUnavailable, eligible: &no, healthy: true})
		})
	}
}
