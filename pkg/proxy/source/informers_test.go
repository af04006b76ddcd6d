package source

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// TestInformerFactories checks what each factory lists and watches with: the selectors
// kube-proxy and the Kubernetes source share, and nothing for the unfiltered one.
func TestInformerFactories(t *testing.T) {
	selector := func(tweak func(*metav1.ListOptions)) string {
		var o metav1.ListOptions
		if tweak != nil {
			tweak(&o)
		}
		return o.LabelSelector + " | " + o.FieldSelector
	}
	tests := []struct {
		name     string
		nodeName string
		want     map[string]string // resource → "labels | fields" of its list
	}{
		{
			name:     "with a node name",
			nodeName: "node-1",
			want: map[string]string{
				"services":       selector(ServiceListOptions),
				"endpointslices": selector(EndpointSliceListOptions),
				"servicecidrs":   selector(nil),
				"nodes":          selector(NodeListOptions("node-1")),
			},
		},
		{
			name: "without a node name, as kube-proxy (its NodeManager watches the Node)",
			want: map[string]string{
				"services":       selector(ServiceListOptions),
				"endpointslices": selector(EndpointSliceListOptions),
				"servicecidrs":   selector(nil),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := st.Service("ns", "web", []string{"10.0.0.1"})
			svc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
			client := fake.NewClientset(svc)
			var mu sync.Mutex
			got := map[string]string{}
			client.PrependReactor("list", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
				r := action.(k8stesting.ListAction).GetListRestrictions()
				mu.Lock()
				defer mu.Unlock()
				got[action.GetResource().Resource] = r.Labels.String() + " | " + r.Fields.String()
				return false, nil, nil
			})

			f := NewInformerFactories(client, 0, tc.nodeName)
			if (f.Node != nil) != (tc.nodeName != "") {
				t.Fatalf("Node factory = %v with node name %q", f.Node, tc.nodeName)
			}
			services := f.Services.Core().V1().Services()
			services.Informer()
			f.EndpointSlices.Discovery().V1().EndpointSlices().Informer()
			f.Unfiltered.Networking().V1().ServiceCIDRs().Informer()
			if f.Node != nil {
				f.Node.Core().V1().Nodes().Informer()
			}
			ctx, cancel := context.WithCancel(context.Background())
			f.Start(ctx.Done())
			t.Cleanup(func() {
				cancel()
				f.Shutdown()
			})
			for _, factory := range f.all() {
				for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
					if !ok {
						t.Fatalf("%v did not sync", typ)
					}
				}
			}

			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("list selectors (-want +got):\n%s", diff)
			}
			cached, err := services.Lister().Services("ns").Get("web")
			if err != nil {
				t.Fatal(err)
			}
			if cached.ManagedFields != nil {
				t.Errorf("cached Service keeps managedFields %v", cached.ManagedFields)
			}
		})
	}
}
