package source

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/config"
)

// Kubernetes is a Source reading an API server through client-go informers.
type Kubernetes struct {
	client   kubernetes.Interface
	nodeName string
	resync   time.Duration
}

// NewKubernetes returns a source reading client, with nodeName's topology labels; a
// Handler that implements NodeHandler is also given the Node nodeName itself. resync is the informers' resync period (kube-proxy's --config-sync-period; 0 disables
// it).
func NewKubernetes(client kubernetes.Interface, nodeName string, resync time.Duration) *Kubernetes {
	return &Kubernetes{client: client, nodeName: nodeName, resync: resync}
}

// trimManagedFields drops managedFields from cached objects: no proxy reads them and they
// are a large share of each object.
func trimManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// Run implements Source.
func (k *Kubernetes) Run(ctx context.Context, h Handler) error {
	if h == nil {
		return fmt.Errorf("kubernetes source: nil handler")
	}
	logger := klog.FromContext(ctx)
	svcFactory := informers.NewSharedInformerFactoryWithOptions(k.client, k.resync,
		informers.WithTransform(trimManagedFields), informers.WithTweakListOptions(ServiceListOptions))
	sliceFactory := informers.NewSharedInformerFactoryWithOptions(k.client, k.resync,
		informers.WithTransform(trimManagedFields), informers.WithTweakListOptions(EndpointSliceListOptions))

	// Handlers are registered before the informers start so no initial add is missed.
	svcConfig := config.NewServiceConfig(ctx, svcFactory.Core().V1().Services(), k.resync)
	svcConfig.RegisterEventHandler(h)
	sliceConfig := config.NewEndpointSliceConfig(ctx, sliceFactory.Discovery().V1().EndpointSlices(), k.resync)
	sliceConfig.RegisterEventHandler(h)

	var nodeFactory informers.SharedInformerFactory
	var nodeConfig *config.NodeConfig
	if k.nodeName != "" {
		nodeFactory = informers.NewSharedInformerFactoryWithOptions(k.client, k.resync,
			informers.WithTransform(trimManagedFields), informers.WithTweakListOptions(NodeListOptions(k.nodeName)))
		topo := config.NewNodeTopologyConfig(ctx, nodeFactory.Core().V1().Nodes(), k.resync)
		topo.RegisterEventHandler(h)
		if nh, ok := h.(NodeHandler); ok {
			nodeConfig = config.NewNodeConfig(ctx, nodeFactory.Core().V1().Nodes(), k.resync)
			nodeConfig.RegisterEventHandler(nh)
		}
	} else {
		logger.Info("No node name: topology hints will not narrow endpoints, and /healthz will not find the Node")
		if nh, ok := h.(NodeHandler); ok {
			nh.OnNodeSynced()
		}
	}

	svcFactory.Start(ctx.Done())
	sliceFactory.Start(ctx.Done())
	if nodeFactory != nil {
		nodeFactory.Start(ctx.Done())
	}
	go svcConfig.Run(ctx.Done())
	go sliceConfig.Run(ctx.Done())
	if nodeConfig != nil {
		go nodeConfig.Run(ctx.Done())
	}

	<-ctx.Done()
	svcFactory.Shutdown()
	sliceFactory.Shutdown()
	if nodeFactory != nil {
		nodeFactory.Shutdown()
	}
	return nil
}
