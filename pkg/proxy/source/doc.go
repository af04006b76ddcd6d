// Package source delivers Services, EndpointSlices and the node's topology labels to a
// proxy built on this library, from one of three places:
//
//   - Kubernetes: an API server, through client-go informers and pkg/proxy/config, with the
//     label and field selectors kube-proxy uses (no headless Services or their slices, no
//     Services claimed by another proxy through service.kubernetes.io/service-proxy-name);
//   - Manifests: YAML/JSON files, watched, through pkg/proxy/manifest, which presents them
//     as an API server so the same informer path runs with no cluster;
//   - Static: objects added, changed and deleted by hand, delivered synchronously, for tests.
//
// All three implement Source and apply the same filtering, so a proxy behaves alike on
// each.
//
// Allowed imports: the brain (pkg/proxy/config, pkg/proxy/apis, pkg/proxy/manifest), the
// standard library and k8s.io/{api,apimachinery,client-go,klog}. No backend.
package source
