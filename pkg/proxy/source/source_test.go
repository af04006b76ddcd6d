package source

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/kube-proxy/pkg/proxy/apis"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// recorder is a Handler writing each event as a line.
type recorder = st.Recorder

var _ Handler = &recorder{}

func headless(s *v1.Service) {
	s.Spec.ClusterIP = v1.ClusterIPNone
	s.Spec.ClusterIPs = []string{v1.ClusterIPNone}
}
func claimed(s *v1.Service) { s.Labels = map[string]string{apis.LabelServiceProxyName: "other"} }

func TestStatic(t *testing.T) {
	v4 := []string{"10.0.0.1"}
	tests := []struct {
		name  string
		steps func(s *Static)
		want  []string
	}{
		{
			name: "add, update, delete",
			steps: func(s *Static) {
				s.SetService(st.Service("ns", "a", v4))
				s.SetService(st.Service("ns", "a", v4, st.NodePort(30000)))
				s.SetEndpointSlice(st.EndpointSlice("ns", "a", "a-1", "http", 80))
				s.DeleteEndpointSlice("ns", "a-1")
				s.DeleteService("ns", "a")
				s.DeleteService("ns", "never-there")
			},
			want: []string{"svc-add ns/a", "svc-update ns/a", "slice-add ns/a-1", "slice-delete ns/a-1", "svc-delete ns/a"},
		},
		{
			name: "headless and claimed services are not delivered; moving in and out is add and delete",
			steps: func(s *Static) {
				s.SetService(st.Service("ns", "h", nil, headless))
				s.SetService(st.Service("ns", "c", v4, claimed))
				s.SetService(st.Service("ns", "c", v4))
				s.SetService(st.Service("ns", "c", v4, claimed))
				s.DeleteService("ns", "c")
				s.DeleteService("ns", "h")
			},
			want: []string{"svc-add ns/c", "svc-delete ns/c"},
		},
		{
			name: "slices of headless services are not delivered",
			steps: func(s *Static) {
				sl := st.EndpointSlice("ns", "h", "h-1", "http", 80)
				sl.Labels[v1.IsHeadlessService] = ""
				s.SetEndpointSlice(sl)
				s.DeleteEndpointSlice("ns", "h-1")
			},
			want: nil,
		},
		{
			name: "only zone changes of the node are reported",
			steps: func(s *Static) {
				s.SetNode(st.Node("n1", "z1"))
				n := st.Node("n1", "z1")
				n.Labels["unrelated"] = "x"
				s.SetNode(n)
				s.SetNode(st.Node("n1", "z2"))
				s.SetNode(st.Node("n1", ""))
			},
			want: []string{"topology map[topology.kubernetes.io/zone:z1]", "topology map[topology.kubernetes.io/zone:z2]", "topology map[]"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStatic()
			r := &recorder{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- s.Run(ctx, r) }()
			waitFor(t, r, "slices-synced")
			r.Take()
			tc.steps(s)
			if diff := cmp.Diff(tc.want, r.Take()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			s.SetService(st.Service("ns", "after", v4))
			if got := r.Take(); len(got) != 0 {
				t.Errorf("events after Run returned: %v", got)
			}
		})
	}
}

func TestStaticInitialDelivery(t *testing.T) {
	s := NewStatic()
	s.SetService(st.Service("ns", "b", []string{"10.0.0.2"}))
	s.SetService(st.Service("ns", "a", []string{"10.0.0.1"}))
	s.SetService(st.Service("ns", "h", nil, headless))
	s.SetEndpointSlice(st.EndpointSlice("ns", "a", "a-1", "http", 80))
	s.SetNode(st.Node("n1", "z1"))
	svc := st.Service("ns", "a", []string{"10.0.0.1"})
	s.SetService(svc)
	svc.Spec.ClusterIP = "mutated after Set" // the source must hold its own copy

	r := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Run(ctx, r) }()
	waitFor(t, r, "topology map[topology.kubernetes.io/zone:z1]")
	want := []string{"svc-add ns/a", "svc-add ns/b", "svc-synced", "slice-add ns/a-1", "slices-synced", "topology map[topology.kubernetes.io/zone:z1]"}
	if diff := cmp.Diff(want, r.Take()); diff != "" {
		t.Errorf("initial events (-want +got):\n%s", diff)
	}
	if s.services[typesNN("ns", "a")].Spec.ClusterIP != "10.0.0.1" {
		t.Errorf("caller's mutation reached the source's copy")
	}
	if err := s.Run(ctx, nil); err == nil {
		t.Errorf("nil handler accepted")
	}
}

func waitFor(t *testing.T, r *recorder, event string) {
	t.Helper()
	r.WaitFor(t, event)
}

// TestListOptionsMatchSelection checks that the selectors given to informers select what
// the Static source delivers.
func TestListOptionsMatchSelection(t *testing.T) {
	var so, eo metav1.ListOptions
	ServiceListOptions(&so)
	EndpointSliceListOptions(&eo)
	sl, err := labels.Parse(so.LabelSelector)
	if err != nil {
		t.Fatal(err)
	}
	sf, err := fields.ParseSelector(so.FieldSelector)
	if err != nil {
		t.Fatal(err)
	}
	el, err := labels.Parse(eo.LabelSelector)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []*v1.Service{
		st.Service("ns", "plain", []string{"10.0.0.1"}),
		st.Service("ns", "headless", nil, headless),
		st.Service("ns", "claimed", []string{"10.0.0.1"}, claimed),
	} {
		bySelector := sl.Matches(labels.Set(svc.Labels)) && sf.Matches(fields.Set{"spec.clusterIP": svc.Spec.ClusterIP})
		if bySelector != serviceSelected(svc) {
			t.Errorf("service %s: selectors say %v, Static says %v", svc.Name, bySelector, serviceSelected(svc))
		}
	}
	for _, hl := range []bool{false, true} {
		slice := st.EndpointSlice("ns", "x", "x-1", "http", 80)
		if hl {
			slice.Labels[v1.IsHeadlessService] = ""
		}
		if el.Matches(labels.Set(slice.Labels)) != sliceSelected(slice) {
			t.Errorf("slice headless=%v: selector and Static disagree", hl)
		}
	}
	var no metav1.ListOptions
	NodeListOptions("n1")(&no)
	if no.FieldSelector != "metadata.name=n1" {
		t.Errorf("node field selector = %q", no.FieldSelector)
	}
}

func typesNN(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
