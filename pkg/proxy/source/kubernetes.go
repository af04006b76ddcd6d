package source

import (
	"context"
	"fmt"
	"time"

	coreinformers "k8s.io/client-go/informers/core/v1"
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
	// nodeInformer: see WithNodeInformer.
	nodeInformer coreinformers.NodeInformer
	// hold: see HoldSyncedUntil.
	hold <-chan struct{}
}

// WithNodeInformer makes k read nodeName's Node from ni, an informer the caller owns and
// starts (kube-proxy's NodeManager has one, watching that one Node), instead of
// watching it a second time. When ni already holds the Node, Run hands its topology
// labels to the Handler before any Service or EndpointSlice: the first sync then picks
// endpoints by zone, and the topology informer's own first report changes nothing
// (arriving after that sync, it would force a second full sync at start-up).
func (k *Kubernetes) WithNodeInformer(ni coreinformers.NodeInformer) *Kubernetes {
	k.nodeInformer = ni
	return k
}

// HoldSyncedUntil makes the Services' and EndpointSlices' "synced" signals, and with
// them a proxier's first sync, wait until ready is closed; events before it still reach
// the Handler. kube-proxy's dry run holds them until the ServiceCIDRs are listed,
// because the first sync is the one it prints and its rules depend on those ranges.
func (k *Kubernetes) HoldSyncedUntil(ready <-chan struct{}) *Kubernetes {
	k.hold = ready
	return k
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
	nodeName := k.nodeName
	if k.nodeInformer != nil {
		nodeName = "" // no second watch of the Node
	}
	factories := NewInformerFactories(k.client, k.resync, nodeName)

	// Handlers are registered before the informers start so no initial add is missed.
	svcConfig := config.NewServiceConfig(ctx, factories.Services.Core().V1().Services(), k.resync)
	svcConfig.RegisterEventHandler(h)
	sliceConfig := config.NewEndpointSliceConfig(ctx, factories.EndpointSlices.Discovery().V1().EndpointSlices(), k.resync)
	sliceConfig.RegisterEventHandler(h)

	var cidrsSynced func()
	var cidrConfig *config.ServiceCIDRConfig
	if !k.noServiceCIDRs {
		if ch, ok := h.(ServiceCIDRHandler); ok {
			cidrsSynced = registerServiceCIDRs(ctx, factories, ch)
		}
		// A proxier wants only the union of the ranges.
		if uh, ok := h.(config.ServiceCIDRHandler); ok {
			cidrConfig = config.NewServiceCIDRConfig(ctx, factories.Unfiltered.Networking().V1().ServiceCIDRs(), k.resync)
			cidrConfig.RegisterEventHandler(uh)
		}
	}

	var nodeConfig *config.NodeConfig
	nodes := k.nodeInformer
	if nodes == nil && factories.Node != nil {
		nodes = factories.Node.Core().V1().Nodes()
	}
	if nodes != nil {
		if k.nodeInformer != nil {
			if node, err := nodes.Lister().Get(k.nodeName); err == nil {
				h.OnTopologyChange(config.NodeTopologyLabels(node))
			}
		}
		topo := config.NewNodeTopologyConfig(ctx, nodes, k.resync)
		topo.RegisterEventHandler(h)
		if nh, ok := h.(NodeHandler); ok {
			nodeConfig = config.NewNodeConfig(ctx, nodes, k.resync)
			nodeConfig.RegisterEventHandler(nh)
		}
	} else {
		logger.Info("No node name: topology hints will not narrow endpoints, and /healthz will not find the Node")
		if nh, ok := h.(NodeHandler); ok {
			nh.OnNodeSynced()
		}
	}

	factories.Start(ctx.Done())
	if cidrConfig != nil {
		go cidrConfig.Run(ctx.Done())
	}
	go func() {
		if k.hold != nil {
			select {
			case <-k.hold:
			case <-ctx.Done():
				return
			}
		}
		go svcConfig.Run(ctx.Done())
		sliceConfig.Run(ctx.Done())
	}()
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
