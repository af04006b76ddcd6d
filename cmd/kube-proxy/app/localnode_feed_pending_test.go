package app

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rvRecorder also records the resource version of added and updated objects.
type rvRecorder struct{ cidrRecordingHandler }

func (r *rvRecorder) OnServiceAdd(s *v1.Service) {
	r.add("svc-add %s rv=%s", s.Name, s.ResourceVersion)
}
func (r *rvRecorder) OnServiceUpdate(_, s *v1.Service) {
	r.add("svc-update %s rv=%s", s.Name, s.ResourceVersion)
}
func (r *rvRecorder) OnEndpointSliceAdd(s *discovery.EndpointSlice) {
	r.add("slice-add %s rv=%s", s.Name, s.ResourceVersion)
}

// TestLocalNodeFeedPendingIsState: what the server sends before the proxier is attached
// is kept as the state it amounts to, however much it churned, and handed on as
// informers would start; events after attach pass straight through.
func TestLocalNodeFeedPendingIsState(t *testing.T) {
	svc := func(name string, rv int) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: fmt.Sprint(rv)}}
	}
	slice := func(name string, rv int) *discovery.EndpointSlice {
		return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: fmt.Sprint(rv)}}
	}
	cidr := func(name, c string) *networkingv1.ServiceCIDR {
		return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{c}}}
	}

	f := newLocalNodeFeed("unix:///unused", "node-1")
	f.OnServiceAdd(svc("web", 1))
	for rv := 2; rv <= 1000; rv++ {
		f.OnServiceUpdate(svc("web", rv-1), svc("web", rv))
	}
	f.OnServiceAdd(svc("gone", 1))
	f.OnServiceDelete(svc("gone", 1))
	f.OnServiceAdd(svc("api", 7))
	f.OnEndpointSliceAdd(slice("web-abc", 1))
	f.OnEndpointSliceUpdate(slice("web-abc", 1), slice("web-abc", 2))
	f.OnEndpointSliceAdd(slice("old", 1))
	f.OnEndpointSliceDelete(slice("old", 1))
	f.OnServiceSynced()
	f.OnEndpointSlicesSynced()
	a, b := cidr("a", "10.96.0.0/16"), cidr("b", "10.97.0.0/16")
	f.OnServiceCIDRAdd(a)
	f.OnServiceCIDRAdd(b)
	f.OnServiceCIDRDelete(a)

	if n := len(f.pending.services) + len(f.pending.slices); n != 3 {
		t.Errorf("pending holds %d objects, want the 3 that exist", n)
	}
	r := &rvRecorder{}
	f.attach(r)
	f.OnServiceUpdate(svc("api", 7), svc("api", 8))
	f.OnEndpointSliceDelete(slice("web-abc", 2))

	want := []string{
		"svc-add api rv=7",
		"svc-add web rv=1000",
		"svc-synced",
		"slice-add web-abc rv=2",
		"slices-synced",
		"cidrs [10.97.0.0/16]",
		"svc-update api rv=8",
		"slice-delete web-abc",
	}
	if !slices.Equal(r.events, want) {
		t.Errorf("the attached target got\n  %s\nwant\n  %s", strings.Join(r.events, "\n  "), strings.Join(want, "\n  "))
	}
}
