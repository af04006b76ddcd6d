package app

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

func TestLocalNodeSourceFlag(t *testing.T) {
	sock := "unix://" + filepath.Join(t.TempDir(), "ln.sock")
	tests := []struct {
		name string
		args []string
		// wantErr are substrings of the error; none means valid.
		wantErr []string
		skip    bool
	}{
		{name: "unset", args: nil},
		{name: "unix socket", args: []string{"--localnode-source=" + sock}},
		{name: "tcp", args: []string{"--localnode-source=tcp://127.0.0.1:7443"}},
		{name: "tcp, IPv6", args: []string{"--localnode-source=tcp://[::1]:7443"}},
		{
			name:    "relative socket path",
			args:    []string{"--localnode-source=unix://run/ln.sock"},
			wantErr: []string{`--localnode-source "unix://run/ln.sock"`, `socket path "run/ln.sock" is not absolute`},
		},
		{
			name:    "empty socket path",
			args:    []string{"--localnode-source=unix://"},
			wantErr: []string{`--localnode-source "unix://"`, "not absolute"},
		},
		{
			name:    "host:port without a scheme",
			args:    []string{"--localnode-source=127.0.0.1:7443"},
			wantErr: []string{`--localnode-source "127.0.0.1:7443"`, "tcp://127.0.0.1:7443"},
		},
		{
			name:    "a path without a scheme",
			args:    []string{"--localnode-source=/run/ln.sock"},
			wantErr: []string{`--localnode-source "/run/ln.sock"`, "want unix:///absolute/path.sock or tcp://host:port"},
		},
		{
			name:    "tcp without a port",
			args:    []string{"--localnode-source=tcp://localhost"},
			wantErr: []string{`--localnode-source "tcp://localhost"`, "missing port"},
		},
		{
			name:    "tcp, bad port",
			args:    []string{"--localnode-source=tcp://localhost:http"},
			wantErr: []string{`--localnode-source "tcp://localhost:http"`, `port "http" is not a number from 1 to 65535`},
		},
		{
			name:    "tcp, port 0",
			args:    []string{"--localnode-source=tcp://localhost:0"},
			wantErr: []string{`port "0"`},
		},
		{
			name:    "tcp without a host",
			args:    []string{"--localnode-source=tcp://:7443"},
			wantErr: []string{`--localnode-source "tcp://:7443"`, `no host in ":7443"`},
		},
		{
			name:    "with --kubeconfig",
			args:    []string{"--localnode-source=" + sock, "--kubeconfig=/etc/kubeconfig"},
			wantErr: []string{`--localnode-source "` + sock + `" cannot be combined with --kubeconfig "/etc/kubeconfig"`},
		},
		{
			name:    "with --master and --manifests",
			args:    []string{"--localnode-source=" + sock, "--master=https://10.0.0.1:6443", "--manifests=/etc/manifests"},
			wantErr: []string{`cannot be combined with --master "https://10.0.0.1:6443", --manifests "/etc/manifests"`},
		},
		{
			name:    "with --localnode-serve",
			args:    []string{"--localnode-source=" + sock, "--localnode-serve=unix:///run/other.sock"},
			wantErr: []string{`cannot be combined with --localnode-serve "unix:///run/other.sock"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip {
				t.Skip("no longer applies")
			}
			_, err := parseAndComplete(t, tc.args)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one containing %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// recordingHandler records the Service and EndpointSlice events it is given.
type recordingHandler struct{ events []string }

func (r *recordingHandler) OnServiceAdd(s *v1.Service) { r.add("svc-add %s", s.Name) }
func (r *recordingHandler) OnServiceUpdate(_, s *v1.Service) {
	r.add("svc-update %s", s.Name)
}
func (r *recordingHandler) OnServiceDelete(s *v1.Service) { r.add("svc-delete %s", s.Name) }
func (r *recordingHandler) OnServiceSynced()              { r.add("svc-synced") }
func (r *recordingHandler) OnEndpointSliceAdd(s *discovery.EndpointSlice) {
	r.add("slice-add %s", s.Name)
}
func (r *recordingHandler) OnEndpointSliceUpdate(_, s *discovery.EndpointSlice) {
	r.add("slice-update %s", s.Name)
}
func (r *recordingHandler) OnEndpointSliceDelete(s *discovery.EndpointSlice) {
	r.add("slice-delete %s", s.Name)
}
func (r *recordingHandler) OnEndpointSlicesSynced() { r.add("slices-synced") }
func (r *recordingHandler) add(format string, args ...any) {
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

// The feed holds what arrives before the proxier exists and replays it, in order, to
// every target; later events go straight through.
func TestLocalNodeFeedAttach(t *testing.T) {
	f := newLocalNodeFeed("unix:///unused.sock", "node-a")
	web := st.Service("ns", "web", []string{"10.0.0.1"})
	slice := st.EndpointSlice("ns", "web", "web-1", "http", 80, st.Endpoint("10.1.0.1", "node-a"))
	f.OnServiceAdd(web)
	f.OnServiceSynced()
	f.OnEndpointSliceAdd(slice)
	f.OnEndpointSlicesSynced()
	f.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "z1"})

	a, b := &recordingHandler{}, &recordingHandler{}
	f.attach(a, b)
	f.OnEndpointSliceUpdate(slice, slice)
	f.OnEndpointSliceDelete(slice)
	f.OnServiceUpdate(web, web)
	f.OnServiceDelete(web)

	want := []string{
		"svc-add web", "svc-synced", "slice-add web-1", "slices-synced",
		"slice-update web-1", "slice-delete web-1", "svc-update web", "svc-delete web",
	}
	for i, h := range []*recordingHandler{a, b} {
		if strings.Join(h.events, "\n") != strings.Join(want, "\n") {
			t.Errorf("target %d got\n%s\nwant\n%s", i, strings.Join(h.events, "\n"), strings.Join(want, "\n"))
		}
	}
}

// The served Node is mirrored into the clientset the NodeManager reads; waitFirstState
// returns once the first state is complete, and refuses a server for another node.
func TestLocalNodeFeedNode(t *testing.T) {
	nodeWithIP := func(name, zone, ip string) *v1.Node {
		n := st.Node(name, zone)
		n.ResourceVersion = "12345" // the server's; must not clash with the clientset's
		n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}
		return n
	}
	tests := []struct {
		name string
		// events are applied to the feed in order, before OnNodeSynced.
		events  func(f *localNodeFeed)
		wantErr string
		// wantIP is the InternalIP of node-a in the clientset; "" for no Node.
		wantIP string
		// wantDeleting: the Node has a deletion timestamp and the autoscaler's taint.
		wantDeleting bool
	}{
		{
			name:   "created",
			events: func(f *localNodeFeed) { f.OnNodeChange(nodeWithIP("node-a", "z1", "198.18.0.1")) },
			wantIP: "198.18.0.1",
		},
		{
			name: "updated",
			events: func(f *localNodeFeed) {
				f.OnNodeChange(nodeWithIP("node-a", "z1", "198.18.0.1"))
				f.OnNodeChange(nodeWithIP("node-a", "z2", "198.18.0.2"))
			},
			wantIP: "198.18.0.2",
		},
		{
			name: "being deleted, tainted: both kept for /healthz",
			events: func(f *localNodeFeed) {
				n := nodeWithIP("node-a", "z1", "198.18.0.1")
				now := metav1.Now()
				n.DeletionTimestamp = &now
				n.Spec.Taints = []v1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Effect: v1.TaintEffectNoSchedule}}
				f.OnNodeChange(n)
			},
			wantIP:       "198.18.0.1",
			wantDeleting: true,
		},
		{
			name: "deleted",
			events: func(f *localNodeFeed) {
				f.OnNodeChange(nodeWithIP("node-a", "z1", "198.18.0.1"))
				f.OnNodeDelete(nodeWithIP("node-a", "z1", "198.18.0.1"))
			},
		},
		{
			name:   "no Node yet: a warning, not an error",
			events: func(*localNodeFeed) {},
		},
		{
			name:    "another node's server",
			events:  func(f *localNodeFeed) { f.OnNodeChange(nodeWithIP("node-b", "z1", "198.18.0.9")) },
			wantErr: `serves node "node-b", but this kube-proxy runs as node "node-a": set --hostname-override "node-b"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newLocalNodeFeed("unix:///unused.sock", "node-a")
			f.nodeDeleteGrace = 0
			tc.events(f)

			waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if err := f.waitFirstState(waitCtx); err == nil || !strings.Contains(err.Error(), "no complete state received") {
				t.Errorf("before the first state: %v, want a timeout", err)
			}

			f.OnNodeSynced()
			waitNodeWrites(f)
			err := f.waitFirstState(ctx)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			nodes, err := f.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range nodes.Items {
				got = append(got, n.Name+"="+n.Status.Addresses[0].Address)
				if deleting := n.DeletionTimestamp != nil && len(n.Spec.Taints) == 1; deleting != tc.wantDeleting {
					t.Errorf("deletion timestamp %v, taints %v; want deleting=%v", n.DeletionTimestamp, n.Spec.Taints, tc.wantDeleting)
				}
			}
			want := []string(nil)
			if tc.wantIP != "" {
				want = []string{"node-a=" + tc.wantIP}
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("clientset holds %v, want %v", got, want)
			}
		})
	}
}

// waitNodeWrites waits until every delayed Node deletion the feed scheduled has run.
func waitNodeWrites(f *localNodeFeed) { f.nodeDeletes.Wait() }

// A Node that is no longer served is removed only after a grace period, and not at all
// when it is served again meanwhile (a restarted server whose Node informer listed
// after its first state was complete).
func TestLocalNodeFeedNodeDeleteGrace(t *testing.T) {
	node := st.Node("node-a", "z1")
	tests := []struct {
		name     string
		events   func(f *localNodeFeed)
		wantNode bool
	}{
		{name: "deleted for good", events: func(f *localNodeFeed) { f.OnNodeDelete(node) }},
		{
			name:     "served again within the grace",
			events:   func(f *localNodeFeed) { f.OnNodeDelete(node); f.OnNodeChange(node) },
			wantNode: true,
		},
		{
			name: "deleted, back, deleted again",
			events: func(f *localNodeFeed) {
				f.OnNodeDelete(node)
				f.OnNodeChange(node)
				f.OnNodeDelete(node)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newLocalNodeFeed("unix:///unused.sock", "node-a")
			f.nodeDeleteGrace = 300 * time.Millisecond
			f.OnNodeChange(node)
			tc.events(f)
			if _, err := f.Client().CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{}); err != nil {
				t.Fatalf("the Node went before the grace ended: %v", err)
			}
			waitNodeWrites(f)
			_, err := f.Client().CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{})
			if got := err == nil; got != tc.wantNode {
				t.Errorf("Node present after the grace: %v (err %v), want %v", got, err, tc.wantNode)
			}
		})
	}
}
