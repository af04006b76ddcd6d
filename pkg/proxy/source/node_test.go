package source

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// nodeRecorder is a recorder that also implements NodeHandler.
type nodeRecorder struct{ st.Recorder }

func (r *nodeRecorder) OnNodeChange(n *v1.Node) {
	r.Add("node-change %s zone=%s", n.Name, n.Labels[v1.LabelTopologyZone])
}
func (r *nodeRecorder) OnNodeDelete(n *v1.Node) { r.Add("node-delete %s", n.Name) }
func (r *nodeRecorder) OnNodeSynced()           { r.Add("node-synced") }

var _ NodeHandler = &nodeRecorder{}

func TestStaticDeliversNode(t *testing.T) {
	tests := []struct {
		name    string
		initial *v1.Node
		steps   func(s *Static)
		// wantInitial are the node events of Run's initial delivery; want those of steps.
		wantInitial, want []string
	}{
		{
			name:        "no node yet: synced only, then the node as it appears and changes",
			wantInitial: []string{"node-synced"},
			steps: func(s *Static) {
				s.SetNode(st.Node("n1", "z1"))
				n := st.Node("n1", "z1")
				n.Spec.Taints = []v1.Taint{{Key: "ToBeDeletedByClusterAutoscaler"}}
				s.SetNode(n)
			},
			want: []string{"node-change n1 zone=z1", "topology map[topology.kubernetes.io/zone:z1]", "node-change n1 zone=z1"},
		},
		{
			name:        "a held node is delivered before synced; delete and re-add",
			initial:     st.Node("n1", "z1"),
			wantInitial: []string{"topology map[topology.kubernetes.io/zone:z1]", "node-change n1 zone=z1", "node-synced"},
			steps: func(s *Static) {
				s.DeleteNode()
				s.DeleteNode()
				s.SetNode(nil)
				s.SetNode(st.Node("n1", "z2"))
			},
			want: []string{"node-delete n1", "node-change n1 zone=z2", "topology map[topology.kubernetes.io/zone:z2]"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStatic()
			if tc.initial != nil {
				s.SetNode(tc.initial)
			}
			r := &nodeRecorder{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx, r) }()
			waitFor(t, &r.Recorder, "node-synced")
			got := r.Take()
			if diff := cmp.Diff(append([]string{"svc-synced", "slices-synced"}, tc.wantInitial...), got); diff != "" {
				t.Errorf("initial events (-want +got):\n%s", diff)
			}
			tc.steps(s)
			if diff := cmp.Diff(tc.want, r.Take()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestKubernetesDeliversNode(t *testing.T) {
	tests := []struct {
		name     string
		nodeName string
		nodes    []*v1.Node
		want     []string
	}{
		{
			name:     "this node is delivered, then synced",
			nodeName: "n1",
			nodes:    []*v1.Node{st.Node("n1", "z1")},
			want:     []string{"node-change n1 zone=z1", "node-synced"},
		},
		{
			name:     "no such node: synced only",
			nodeName: "n1",
			want:     []string{"node-synced"},
		},
		{
			name:  "no node name: synced only",
			nodes: []*v1.Node{st.Node("n1", "z1")},
			want:  []string{"node-synced"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			for _, n := range tc.nodes {
				if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			r := &nodeRecorder{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- NewKubernetes(client, tc.nodeName, 0).Run(ctx, r) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			})
			waitFor(t, &r.Recorder, "node-synced")
			waitFor(t, &r.Recorder, "slices-synced")
			var got []string
			for _, e := range r.Take() {
				if e[:4] == "node" {
					got = append(got, e)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("node events (-want +got):\n%s", diff)
			}
			if tc.nodeName == "" || len(tc.nodes) == 0 {
				return
			}
			if err := client.CoreV1().Nodes().Delete(context.Background(), tc.nodeName, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, &r.Recorder, "node-delete "+tc.nodeName)
		})
	}
}

// With a Node informer of the caller's that already holds the Node, the topology
// labels come first, before any Service, and the Node is not watched a second time;
// HoldSyncedUntil keeps the Services' and EndpointSlices' synced signals back until
// it is released, while the objects themselves are delivered.
func TestKubernetesNodeInformerAndHold(t *testing.T) {
	client := fake.NewClientset(st.Node("n1", "z1"), st.Service("ns", "web", []string{"10.0.0.1"}))
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes()
	nodes.Informer() // asked for before Start
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		t.Fatal("node informer did not sync")
	}

	hold := make(chan struct{})
	r := &nodeRecorder{}
	done := make(chan error, 1)
	go func() {
		done <- NewKubernetes(client, "n1", 0).WithNodeInformer(nodes).HoldSyncedUntil(hold).Run(ctx, r)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		factory.Shutdown()
	})
	waitFor(t, &r.Recorder, "svc-add ns/web")
	waitFor(t, &r.Recorder, "node-synced")
	got := r.Take()
	if len(got) == 0 || got[0] != "topology map[topology.kubernetes.io/zone:z1]" {
		t.Fatalf("first event %v, want the held Node's topology before anything else", got)
	}
	if slices.Contains(got, "svc-synced") || slices.Contains(got, "slices-synced") {
		t.Fatalf("synced before the hold was released: %v", got)
	}
	close(hold)
	waitFor(t, &r.Recorder, "svc-synced")
	waitFor(t, &r.Recorder, "slices-synced")
	if n := countVerb(client.Actions(), "nodes", "watch"); n != 1 {
		t.Fatalf("the Node is watched %d times, want once (the caller's informer)", n)
	}
}

func countVerb(actions []clienttesting.Action, resource, verb string) int {
	n := 0
	for _, a := range actions {
		if a.GetResource().Resource == resource && a.GetVerb() == verb {
			n++
		}
	}
	return n
}
