// Package manifests is the library's file-backed Source: Services, EndpointSlices and
// Nodes read from YAML or JSON files through pkg/proxy/manifest, which presents them as
// an API server so kube-proxy's own informer path (source.Kubernetes) runs with no
// cluster.
//
// It is a package of its own, apart from k8s.io/kube-proxy/pkg/proxy/source, because
// pkg/proxy/manifest keeps its objects in client-go's fake clientset: a proxy on the
// static or Kubernetes source must not link that (about sixty packages and several
// megabytes) for a feature it does not use.
//
// Allowed imports: k8s.io/kube-proxy/pkg/proxy/{source,manifest}, the standard library
// and k8s.io/klog. No backend.
package manifests
