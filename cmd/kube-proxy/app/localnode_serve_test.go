package app

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// TestLocalNodeServe: with --localnode-serve the running proxy serves the node-local
// state of its client's objects, and `kube-proxy state --socket` reads it; without the
// flag nothing is served.
func TestLocalNodeServe(t *testing.T) {
	client := fake.NewClientset(
		st.Service("ns", "web", []string{"10.0.0.1"}),
		st.EndpointSlice("ns", "web", "web-1", "http", 8080, st.Endpoint("10.1.0.1", "node-a"), st.Endpoint("10.1.0.2", "node-b")),
		st.Node("node-a", "z1"),
	)
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	cfg.MinSyncPeriod.Duration = time.Millisecond
	s := &ProxyServer{Config: cfg, Client: client, NodeName: "node-a"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	off := "unix://" + filepath.Join(t.TempDir(), "off.sock")
	s.startLocalNodeServer(ctx, "")
	if _, err := runState(t, "--socket", off, "--timeout", "200ms"); err == nil {
		t.Error("something is served without --localnode-serve")
	}

	addr := "unix://" + filepath.Join(t.TempDir(), "ln.sock")
	s.startLocalNodeServer(ctx, addr)
	var doc stateDoc
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := runState(t, "--socket", addr, "-o", "json", "--timeout", "2s")
		if err == nil {
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing served at %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(doc.Services) != 1 || doc.Services[0].Name.Name != "web" || len(doc.Services[0].Endpoints) != 2 {
		t.Errorf("served state: %+v", doc.Services)
	}
}
