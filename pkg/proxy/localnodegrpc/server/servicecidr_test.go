package server

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

func serviceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

// ServiceCIDRs are served in the global view, by name, from the first batch on (the
// server is not ready before the source has listed them), then as changes; a node-local
// watcher is not sent them.
func TestServeServiceCIDRs(t *testing.T) {
	objs := []runtime.Object{
		st.Node(testNode, "z1"), svc(0), slice(0, 2, 0),
		serviceCIDR("kubernetes", "10.96.0.0/12", "fd00:96::/112"),
	}
	client := fake.NewClientset(objs...)
	r := start(t, source.NewKubernetes(client, testNode, 0), t.TempDir(), Options{})
	conn := dial(t, r.addr)
	global, _ := collect(t, conn, &localnodev1.WatchRequest{Global: true})
	local, _ := collect(t, conn, &localnodev1.WatchRequest{NodeLocal: true})

	b := next(t, global)
	var got *localnodev1.ServiceCIDR
	for _, op := range b.Ops {
		if c := op.GetSetServiceCidr(); c != nil {
			got = c
		}
	}
	if got.GetName() != "kubernetes" || len(got.GetCidrs()) != 2 || got.GetCidrs()[1] != "fd00:96::/112" {
		t.Fatalf("first global batch: ServiceCIDR %v, want kubernetes [10.96.0.0/12 fd00:96::/112]; ops %v", got, b.Ops)
	}
	for _, op := range next(t, local).Ops {
		if op.GetSetServiceCidr() != nil {
			t.Errorf("node-local watcher was sent %v", op)
		}
	}

	ctx := context.Background()
	cidrs := client.NetworkingV1().ServiceCIDRs()
	if _, err := cidrs.Update(ctx, serviceCIDR("kubernetes", "10.96.0.0/12"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b = next(t, global)
	if len(b.Ops) != 1 || len(b.Ops[0].GetSetServiceCidr().GetCidrs()) != 1 {
		t.Fatalf("after an update: ops %v, want one set_service_cidr with one CIDR", b.Ops)
	}
	if err := cidrs.Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b = next(t, global)
	if len(b.Ops) != 1 || b.Ops[0].GetDeleteServiceCidr().GetName() != "kubernetes" {
		t.Fatalf("after a delete: ops %v, want delete_service_cidr kubernetes", b.Ops)
	}
	select {
	case lb := <-local:
		t.Errorf("node-local watcher was sent a batch for ServiceCIDR changes: %v", lb.Ops)
	default:
	}
}

// gatedCIDRSource is a Static source that says it delivers ServiceCIDRs but lists them
// only once release is closed.
type gatedCIDRSource struct {
	*source.Static
	release chan struct{}
}

func (g *gatedCIDRSource) DeliversServiceCIDRs() bool { return true }

func (g *gatedCIDRSource) Run(ctx context.Context, h source.Handler) error {
	go func() {
		select {
		case <-g.release:
		case <-ctx.Done():
			return
		}
		ch := h.(source.ServiceCIDRHandler)
		ch.OnServiceCIDRAdd(serviceCIDR("kubernetes", "10.96.0.0/12"))
		ch.OnServiceCIDRsSynced()
	}()
	return g.Static.Run(ctx, h)
}

// nodeGate passes everything on at once except the Node and OnNodeSynced, which it queues
// in held for gatedNodeSource to pass on.
type nodeGate struct {
	source.Handler
	nh   source.NodeHandler
	held chan func()
}

func (n *nodeGate) OnNodeChange(node *v1.Node) { n.held <- func() { n.nh.OnNodeChange(node) } }
func (n *nodeGate) OnNodeDelete(node *v1.Node) { n.held <- func() { n.nh.OnNodeDelete(node) } }
func (n *nodeGate) OnNodeSynced()              { n.held <- n.nh.OnNodeSynced }

// gatedNodeSource is a Static source whose Node reaches the handler only once release is
// closed, as a Node informer that syncs after the Service and EndpointSlice ones does.
type gatedNodeSource struct {
	*source.Static
	release chan struct{}
}

func (g *gatedNodeSource) Run(ctx context.Context, h source.Handler) error {
	gate := &nodeGate{Handler: h, nh: h.(source.NodeHandler), held: make(chan func(), 8)}
	go func() {
		select {
		case <-g.release:
		case <-ctx.Done():
			return
		}
		for {
			select {
			case f := <-gate.held:
				f()
			case <-ctx.Done():
				return
			}
		}
	}()
	return g.Static.Run(ctx, gate)
}

// The server is not ready, so no watcher gets a first state without part of the global
// view, until the source has listed every part: the ServiceCIDRs of a source that
// delivers them (a source that does not, Static, is not waited for: every other test),
// and this node's Node (`kube-proxy state --global` once printed none when the Node
// informer synced last).
func TestReadyWaitsForTheWholeGlobalView(t *testing.T) {
	for _, tc := range []struct {
		name string
		// gate wraps the cluster's Static source so that one part waits for release.
		gate func(static *source.Static, release chan struct{}) source.Source
		// rest reports whether everything but the gated part is in.
		rest func(s *Server) bool
		// found reports whether op is the gated part.
		found func(op *localnodev1.Op) bool
	}{{
		name: "ServiceCIDRs",
		gate: func(static *source.Static, release chan struct{}) source.Source {
			return &gatedCIDRSource{Static: static, release: release}
		},
		rest:  func(s *Server) bool { return s.svcSynced && s.slicesSynced && s.nodeSynced },
		found: func(op *localnodev1.Op) bool { return op.GetSetServiceCidr().GetName() == "kubernetes" },
	}, {
		name: "Node",
		gate: func(static *source.Static, release chan struct{}) source.Source {
			return &gatedNodeSource{Static: static, release: release}
		},
		rest:  func(s *Server) bool { return s.svcSynced && s.slicesSynced && s.cidrsSynced },
		found: func(op *localnodev1.Op) bool { return op.GetSetNode().GetName() == testNode },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			static := source.NewStatic()
			cluster(static, 2, 2)
			release := make(chan struct{})
			src := tc.gate(static, release)
			srv, err := New(Options{})
			if err != nil {
				t.Fatal(err)
			}
			srv.opts.Proxy.NodeName, srv.opts.Proxy.MinSyncInterval = testNode, time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			t.Cleanup(func() { cancel(); <-done })
			go func() { _ = srv.Run(ctx, src); close(done) }()

			// Wait until everything but the gated part is in: then readiness hangs on
			// it alone.
			deadline := time.Now().Add(30 * time.Second)
			for {
				srv.mu.Lock()
				rest := tc.rest(srv) && len(srv.familiesSeen) == len(srv.families)
				srv.mu.Unlock()
				if rest {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the server never synced the rest of its view and its State")
				}
				time.Sleep(time.Millisecond)
			}
			select {
			case <-srv.Ready():
				t.Fatalf("ready before the source listed its %s", tc.name)
			default:
			}
			close(release)
			select {
			case <-srv.Ready():
			case <-time.After(30 * time.Second):
				t.Fatalf("not ready after the %s were listed", tc.name)
			}
			ops, _, err := srv.Snapshot(ctx, &localnodev1.WatchRequest{Global: true})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(ops, tc.found) {
				t.Errorf("snapshot lacks the %s: %v", tc.name, ops)
			}
		})
	}
}
