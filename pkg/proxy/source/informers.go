package source

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// InformerFactories are the shared informer factories a proxy watches an API server
// through, one per selection, each narrowed by this package's list options and dropping
// managedFields. kube-proxy's Run and the Kubernetes source both build theirs here, so
// the binary and the library list and watch exactly the same objects.
type InformerFactories struct {
	// Services selects no headless Service and none claimed by another proxy
	// (ServiceListOptions).
	Services informers.SharedInformerFactory
	// EndpointSlices selects no slice of a headless Service (EndpointSliceListOptions).
	EndpointSlices informers.SharedInformerFactory
	// Unfiltered selects everything; kube-proxy reads ServiceCIDRs through it.
	Unfiltered informers.SharedInformerFactory
	// Node selects only this node's Node (NodeListOptions); nil without a node name.
	Node informers.SharedInformerFactory
}

// NewInformerFactories returns the factories for client, with resync as every
// informer's resync period (0 disables it) and a Node factory when nodeName is set. A
// factory only lists and watches the kinds asked of it before Start.
func NewInformerFactories(client kubernetes.Interface, resync time.Duration, nodeName string) *InformerFactories {
	newFactory := func(tweak func(*metav1.ListOptions)) informers.SharedInformerFactory {
		opts := []informers.SharedInformerOption{informers.WithTransform(trimManagedFields)}
		if tweak != nil {
			opts = append(opts, informers.WithTweakListOptions(tweak))
		}
		return informers.NewSharedInformerFactoryWithOptions(client, resync, opts...)
	}
	f := &InformerFactories{
		Services:       newFactory(ServiceListOptions),
		EndpointSlices: newFactory(EndpointSliceListOptions),
		Unfiltered:     newFactory(nil),
	}
	if nodeName != "" {
		f.Node = newFactory(NodeListOptions(nodeName))
	}
	return f
}

func (f *InformerFactories) all() []informers.SharedInformerFactory {
	all := []informers.SharedInformerFactory{f.Services, f.EndpointSlices, f.Unfiltered}
	if f.Node != nil {
		all = append(all, f.Node)
	}
	return all
}

// Start starts the informers asked for so far, until stop is closed.
func (f *InformerFactories) Start(stop <-chan struct{}) {
	for _, factory := range f.all() {
		factory.Start(stop)
	}
}

// Shutdown waits for the started informers to stop; stop must be closed first.
func (f *InformerFactories) Shutdown() {
	for _, factory := range f.all() {
		factory.Shutdown()
	}
}

// trimManagedFields drops managedFields from cached objects: no proxy reads them and they
// are a large share of each object.
func trimManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}
