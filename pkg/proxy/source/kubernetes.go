package source

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/config"
)

// Kubernetes is a Source reading an API server through client-go informers. It also
// delivers ServiceCIDRs to a Handler that implements ServiceCIDRHandler.
type Kubernetes struct {
	client   kubernetes.Interface
	nodeName string
	resync   time.Duration
	// noServiceCIDRs: see WithoutServiceCIDRs.
	noServiceCIDRs bool
}

// WithoutServiceCIDRs stops k from watching ServiceCIDRs, for an API server that does
// not serve networking.k8s.io/v1 ServiceCIDR to this client (the API turned off, or
// RBAC without it): its informer would never list, and a consumer waiting for
// OnServiceCIDRsSynced would wait forever. kube-proxy ties this to the
// MultiCIDRServiceAllocator gate, as it does for its own ServiceCIDR informer.
func (k *Kubernetes) WithoutServiceCIDRs() *Kubernetes {
	k.noServiceCIDRs = true
	return k
}

// NewKubernetes returns a source reading client, with nodeName's topology labels; a
// Handler that implements NodeHandler is also given the Node nodeName itself. resync is the informers' resync period (kube-proxy's --config-sync-period; 0 disables
// it).
func NewKubernetes(client kubernetes.Interface, nodeName string, resync time.Duration) *Kubernetes {
	return &Kubernetes{client: client, nodeName: nodeName, resync: resync}
}

// Run implements Source.
func (k *Kubernetes) Run(ctx context.Context, h Handler) error {
	if h == nil {
		return fmt.Errorf("kubernetes source: nil handler")
	}
	logger := klog.FromContext(ctx)
	factories := NewInformerFactories(k.client, k.resync, k.nodeName)

	// Handlers are registered before the informers start so no initial add is missed.
	svcConfig := config.NewServiceConfig(ctx, factories.Services.Core().V1().Services(), k.resync)
	svcConfig.RegisterEventHandler(h)
	sliceConfig := config.NewEndpointSliceConfig(ctx, factories.EndpointSlices.Discovery().V1().EndpointSlices(), k.resync)
	sliceConfig.RegisterEventHandler(h)

	var cidrsSynced func()
	if ch, ok := h.(ServiceCIDRHandler); ok && !k.noServiceCIDRs {
		cidrsSynced = registerServiceCIDRs(ctx, factories, ch)
	}

	var nodeConfig *config.NodeConfig
	if factories.Node != nil {
		topo := config.NewNodeTopologyConfig(ctx, factories.Node.Core().V1().Nodes(), k.resync)
		topo.RegisterEventHandler(h)
		if nh, ok := h.(NodeHandler); ok {
			nodeConfig = config.NewNodeConfig(ctx, factories.Node.Core().V1().Nodes(), k.resync)
			nodeConfig.RegisterEventHandler(nh)
		}
	} else {
		logger.Info("No node name: topology hints will not narrow endpoints, and /healthz will not find the Node")
		if nh, ok := h.(NodeHandler); ok {
			nh.OnNodeSynced()
		}
	}

	factories.Start(ctx.Done())
	go svcConfig.Run(ctx.Done())
	go sliceConfig.Run(ctx.Done())
	if nodeConfig != nil {
		go nodeConfig.Run(ctx.Done())
	}
	if cidrsSynced != nil {
		go cidrsSynced()
	}

	<-ctx.Done()
	factories.Shutdown()
	return nil
}
