// Package source delivers Services, EndpointSlices, the node's topology labels and the
// Node itself to a proxy built on this library. Its sources:
//
//   - Kubernetes: an API server, through client-go informers and pkg/proxy/config, with the
//     label and field selectors kube-proxy uses (no headless Services or their slices, no
//     Services claimed by another proxy through service.kubernetes.io/service-proxy-name),
//     from InformerFactories, which cmd/kube-proxy builds its informers with too;
//   - Static: objects added, changed and deleted by hand, delivered synchronously, for tests
//     and for programs that learn of Services some other way.
//
// The file-backed source lives in k8s.io/kube-proxy/pkg/proxy/source/manifests: it keeps
// its objects in client-go's fake clientset, which a proxy on these two sources should not
// have to link.
//
// All sources implement Source and apply the same filtering, so a proxy behaves alike on
// each. Every Source delivers the Node (for /healthz's node eligibility) to a Handler that
// also implements NodeHandler. Those that implement ServiceCIDRSource (Kubernetes, the
// manifests, the LocalNode client) also deliver the cluster's ServiceCIDRs to a Handler
// that implements ServiceCIDRHandler; Static does not.
//
// Allowed imports: the brain (pkg/proxy/config, pkg/proxy/apis), the standard library and
// k8s.io/{api,apimachinery,client-go,klog}. Not pkg/proxy/source/manifests (see above); no
// backend.
package source
