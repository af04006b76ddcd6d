package proxy

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	v1informers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// NodeManager watches kube-proxy's own Node. Proxiers are built for the node
// IPs (and, in NodeCIDR local-detection mode, the PodCIDRs) seen at startup,
// so when those change, or the Node is deleted, kube-proxy exits and lets its
// supervisor restart it with fresh state.
//
// The zero value (new(NodeManager)) is usable as a plain node holder, as a
// library proxy's health server needs: it records nodes passed to
// OnNodeChange and serves them from Node(), and forgets the node on
// OnNodeDelete (so /healthz stops calling the node eligible, where kube-proxy
// would have exited); it has no startup baseline, so it never exits.
type NodeManager struct {
	nodeInformer v1informers.NodeInformer
	nodeLister   corelisters.NodeLister
	// exitFunc is os.Exit in production; nil in the zero value.
	exitFunc      func(code int)
	watchPodCIDRs bool
	// initialized is set by NewNodeManager: only then are nodeIPs and
	// podCIDRs a baseline whose change warrants exiting.
	initialized bool

	// Constant after construction.
	nodeIPs  []net.IP
	podCIDRs []string

	mu   sync.Mutex
	node *v1.Node
}

// NewNodeManager starts a single-node informer for nodeName, waits for it to
// sync, then waits up to 30s for the Node to have IPs and, when
// config.DetectLocalMode is NodeCIDR, up to 5 minutes for PodCIDRs (an error
// if they never come). Without PodCIDR watching, a missing Node or missing
// IPs are logged but not fatal, as upstream behaves.
func NewNodeManager(ctx context.Context, client clientset.Interface, nodeName string, config *kubeproxyconfig.KubeProxyConfiguration) (*NodeManager, error) {
	if client == nil || config == nil {
		return nil, fmt.Errorf("node manager for node %q needs a client and a configuration", nodeName)
	}
	return newNodeManager(ctx, client, config.ConfigSyncPeriod.Duration, nodeName,
		config.DetectLocalMode == kubeproxyconfig.LocalModeNodeCIDR,
		os.Exit, time.Second, 30*time.Second, 5*time.Minute)
}

// NewStaticNodeManager is NewNodeManager for a client that holds every
// object as soon as its informer has synced, such as the in-memory API
// server of kube-proxy's --manifests: what the Node says then is final, so
// it waits for nothing. The outcomes are NewNodeManager's after its waits
// ran out, reached at once: without the Node (or its IPs) it proceeds, as
// upstream does after 30s, and only NodeCIDR mode, which cannot work
// without the Node's PodCIDRs, fails.
func NewStaticNodeManager(ctx context.Context, client clientset.Interface, nodeName string, config *kubeproxyconfig.KubeProxyConfiguration) (*NodeManager, error) {
	if client == nil || config == nil {
		return nil, fmt.Errorf("node manager for node %q needs a client and a configuration", nodeName)
	}
	return newNodeManager(ctx, client, config.ConfigSyncPeriod.Duration, nodeName,
		config.DetectLocalMode == kubeproxyconfig.LocalModeNodeCIDR,
		os.Exit, time.Second, 0, 0)
}

// newNodeManager waits up to nodeIPsTimeout for the Node's IPs and up to
// podCIDRsTimeout for its PodCIDRs; both 0 means a static source, where
// waiting could change nothing.
func newNodeManager(ctx context.Context, client clientset.Interface, resyncInterval time.Duration,
	nodeName string, watchPodCIDRs bool, exitFunc func(int),
	pollInterval, nodeIPsTimeout, podCIDRsTimeout time.Duration,
) (*NodeManager, error) {
	logger := klog.FromContext(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(client, resyncInterval,
		informers.WithTransform(stripManagedFields),
		informers.WithTweakListOptions(func(options *metav1.ListOptions) {
			options.FieldSelector = fields.OneTermEqualSelector("metadata.name", nodeName).String()
		}))
	nodeInformer := factory.Core().V1().Nodes()
	nodeLister := nodeInformer.Lister()

	// The informer feeds NodeConfig for the life of the process, so it must
	// outlive ctx, which may only bound startup.
	factory.Start(wait.NeverStop)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, nodeInformer.Informer().HasSynced) {
		return nil, fmt.Errorf("can not sync node informer for node %q", nodeName)
	}

	static := nodeIPsTimeout == 0 && podCIDRsTimeout == 0
	node, nodeIPs, podCIDRs := getNodeInfo(logger, nodeLister, nodeName)
	if len(nodeIPs) == 0 && !static {
		waitCtx, cancel := context.WithTimeout(ctx, nodeIPsTimeout)
		_ = wait.PollUntilContextCancel(waitCtx, pollInterval, false, func(context.Context) (bool, error) {
			node, nodeIPs, podCIDRs = getNodeInfo(logger, nodeLister, nodeName)
			return len(nodeIPs) != 0, nil
		})
		cancel()
	}
	if watchPodCIDRs && len(podCIDRs) == 0 && static {
		if node == nil {
			return nil, fmt.Errorf("node %q does not exist, and detect-local-mode NodeCIDR needs its spec.podCIDRs", nodeName)
		}
		return nil, fmt.Errorf("node %q has no spec.podCIDRs, which detect-local-mode NodeCIDR needs", nodeName)
	}
	if watchPodCIDRs && len(podCIDRs) == 0 {
		waitCtx, cancel := context.WithTimeout(ctx, podCIDRsTimeout)
		_ = wait.PollUntilContextCancel(waitCtx, pollInterval, false, func(context.Context) (bool, error) {
			node, nodeIPs, podCIDRs = getNodeInfo(logger, nodeLister, nodeName)
			return len(podCIDRs) != 0, nil
		})
		cancel()
		if len(podCIDRs) == 0 {
			if node == nil {
				return nil, fmt.Errorf("timeout waiting for node %q to exist", nodeName)
			}
			return nil, fmt.Errorf("timeout waiting for PodCIDR allocation on node %q", nodeName)
		}
	}

	switch {
	case node == nil && static:
		logger.Error(nil, "Node does not exist; proceeding without its IPs", "node", klog.KRef("", nodeName))
	case node != nil && len(nodeIPs) == 0 && static:
		logger.Error(nil, "Node has no IPs; proceeding without them", "node", klog.KRef("", nodeName))
	case node == nil:
		logger.Error(nil, "Timed out waiting for node to exist", "node", klog.KRef("", nodeName))
	case len(nodeIPs) == 0:
		logger.Error(nil, "Timed out waiting for node to be assigned IPs", "node", klog.KRef("", nodeName))
	}

	return &NodeManager{
		nodeInformer:  nodeInformer,
		nodeLister:    nodeLister,
		exitFunc:      exitFunc,
		watchPodCIDRs: watchPodCIDRs,
		initialized:   true,
		nodeIPs:       nodeIPs,
		podCIDRs:      podCIDRs,
		node:          node,
	}, nil
}

// stripManagedFields drops managedFields from cached objects: kube-proxy
// never reads them and they are a large share of a Node's size.
func stripManagedFields(obj interface{}) (interface{}, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

func getNodeInfo(logger klog.Logger, lister corelisters.NodeLister, nodeName string) (*v1.Node, []net.IP, []string) {
	node, err := lister.Get(nodeName)
	if err != nil || node == nil {
		return nil, nil, nil
	}
	ips, err := GetNodeHostIPs(node)
	if err != nil {
		logger.V(4).Info("Node has no usable IPs yet", "node", klog.KObj(node), "err", err)
	}
	return node, ips, node.Spec.PodCIDRs
}

// GetNodeHostIPs returns the node's primary IP and, if it has one, its
// first IP of the other family: InternalIPs are preferred over ExternalIPs.
// These are the addresses kubelet reports as the host IPs of the node.
func GetNodeHostIPs(node *v1.Node) ([]net.IP, error) {
	if node == nil {
		return nil, fmt.Errorf("node is nil")
	}
	var all []net.IP
	for _, addrType := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, addr := range node.Status.Addresses {
			if addr.Type != addrType {
				continue
			}
			if ip := netutils.ParseIPSloppy(addr.Address); ip != nil {
				all = append(all, ip)
			}
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("node %q: host IP unknown; known addresses: %v", node.Name, node.Status.Addresses)
	}
	ips := []net.IP{all[0]}
	primaryIsV6 := netutils.IsIPv6(all[0])
	for _, ip := range all[1:] {
		if netutils.IsIPv6(ip) != primaryIsV6 {
			ips = append(ips, ip)
			break
		}
	}
	return ips, nil
}

// NodeIPs returns the node IPs found at startup; empty if NewNodeManager
// timed out before the Node had any.
func (n *NodeManager) NodeIPs() []net.IP { return n.nodeIPs }

// PodCIDRs returns the PodCIDRs found at startup.
func (n *NodeManager) PodCIDRs() []string { return n.podCIDRs }

// Node returns a copy of the latest Node, or nil if none has been seen.
func (n *NodeManager) Node() *v1.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.node == nil {
		return nil
	}
	return n.node.DeepCopy()
}

// NodeInformer returns the single-node informer; nil for the zero value.
func (n *NodeManager) NodeInformer() v1informers.NodeInformer { return n.nodeInformer }

// OnNodeChange records node and exits the process if its IPs, or (when
// watching them) its PodCIDRs, differ from those seen at startup.
func (n *NodeManager) OnNodeChange(node *v1.Node) {
	if node == nil {
		return
	}
	n.mu.Lock()
	n.node = node
	n.mu.Unlock()

	if !n.initialized {
		return
	}
	logger := klog.Background()
	if n.watchPodCIDRs && !slices.Equal(n.podCIDRs, node.Spec.PodCIDRs) {
		logger.Info("PodCIDRs changed for the node", "node", klog.KObj(node),
			"newPodCIDRs", node.Spec.PodCIDRs, "oldPodCIDRs", n.podCIDRs)
		n.exit()
		return
	}
	nodeIPs, _ := GetNodeHostIPs(node)
	if !slices.EqualFunc(n.nodeIPs, nodeIPs, net.IP.Equal) {
		logger.Info("NodeIPs changed for the node", "node", klog.KObj(node),
			"newNodeIPs", nodeIPs, "oldNodeIPs", n.nodeIPs)
		n.exit()
	}
}

// OnNodeDelete exits the process: kube-proxy's own Node is going away. The
// zero value forgets the node instead.
func (n *NodeManager) OnNodeDelete(node *v1.Node) {
	if !n.initialized {
		n.mu.Lock()
		n.node = nil
		n.mu.Unlock()
		return
	}
	klog.Background().Info("Node is being deleted", "node", klog.KObj(node))
	n.exit()
}

// OnNodeSynced implements config.NodeHandler; there is nothing to do.
func (n *NodeManager) OnNodeSynced() {}

func (n *NodeManager) exit() {
	klog.Flush()
	if n.exitFunc != nil {
		n.exitFunc(1)
	}
}
