package manifests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy/apis"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// recorder is a source.Handler and source.NodeHandler writing each event as a line.
type recorder struct{ st.Recorder }

func (r *recorder) OnNodeChange(n *v1.Node) { r.Add("node-change %s", n.Name) }
func (r *recorder) OnNodeDelete(n *v1.Node) { r.Add("node-delete %s", n.Name) }
func (r *recorder) OnNodeSynced()           { r.Add("node-synced") }

var (
	_ source.Handler     = &recorder{}
	_ source.NodeHandler = &recorder{}
)

func waitFor(t *testing.T, r *recorder, event string) {
	t.Helper()
	r.WaitFor(t, event)
}

func TestManifests(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	svc := func(name, clusterIP, extra string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %s, namespace: demo%s}
spec:
  clusterIP: %s
  ports: [{name: http, port: 80, protocol: TCP}]
`, name, extra, clusterIP)
	}
	write("web.yaml", svc("web", "10.96.0.10", ""))
	write("db.yaml", svc("db", "None", ""))
	write("other.yaml", svc("other", "10.96.0.11", ", labels: {"+apis.LabelServiceProxyName+": someone-else}"))
	write("slice.yaml", `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: demo, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: [198.19.1.10]
  nodeName: node-1
`)
	nodes := `apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {topology.kubernetes.io/zone: zone-a}}
---
apiVersion: v1
kind: Node
metadata: {name: node-2, labels: {topology.kubernetes.io/zone: zone-b}}
`
	write("nodes.yaml", nodes)

	src := New(dir, "node-1", 100*time.Millisecond)
	r := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, r) }()
	for _, e := range []string{"slices-synced", "svc-synced", "node-synced", "topology map[topology.kubernetes.io/zone:zone-a]"} {
		waitFor(t, r, e)
	}
	got := r.Take()
	slices.Sort(got)
	want := []string{"node-change node-1", "node-synced", "slice-add demo/web-1", "slices-synced", "svc-add demo/web",
		"svc-synced", "topology map[topology.kubernetes.io/zone:zone-a]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("initial events (-want +got):\n%s", diff)
	}

	write("web.yaml", svc("web", "10.96.0.10", ", annotations: {edited: \"yes\"}"))
	waitFor(t, r, "svc-update demo/web")
	if err := os.Remove(filepath.Join(dir, "slice.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, "slice-delete demo/web-1")
	// This node leaving the files is the Node's deletion, so /healthz stops answering 200.
	write("nodes.yaml", nodes[strings.Index(nodes, "---"):])
	waitFor(t, r, "node-delete node-1")
	for _, e := range r.Take() {
		if strings.Contains(e, "db") || strings.Contains(e, "other") || strings.Contains(e, "node-2") {
			t.Errorf("filtered object delivered: %s", e)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if err := New(filepath.Join(dir, "missing"), "", 0).Run(context.Background(), r); err == nil {
		t.Fatal("a missing path must fail Run at once")
	}
}
