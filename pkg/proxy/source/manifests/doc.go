// Package manifests runs a proxy from Services, EndpointSlices, Nodes and ServiceCIDRs
// read from manifest files instead of an API server.
//
// Source is the library's file-backed source.Source. It is built on a Reader, which
// reads one file or a directory tree of YAML or JSON files (multi-document YAML, JSON
// streams, and `List` kinds are all accepted) and keeps a client-go fake clientset in
// step with them: objects are created, updated and deleted as the files change
// (fsnotify plus a periodic rescan). Because the result is an ordinary
// kubernetes.Interface, kube-proxy's own informer path (source.Kubernetes, and the
// binary's --manifests) runs unchanged with no cluster.
//
// The fake clientset that client-go ships ignores field selectors and does not filter
// watches at all; kube-proxy relies on both (the single-node informer selects
// metadata.name, the Service informer excludes headless Services), so the clientset
// returned by Reader.Client filters lists and watches the way an API server would.
//
// A document that cannot be used is rejected with its file, line and reason while the
// rest of the files apply. Documents are validated the way an API server validates
// them on create, as far as that does not depend on its flags, and Services may not
// share a cluster IP or node port. Objects that are normally completed by the API
// server (cluster IPs, node ports) must be written out in full, since nothing
// allocates them.
//
// Reading is defensive, since a bad path must never look like "no Services": symlinks
// (the path's own included) are followed and loops cut; special files are skipped
// without being opened in a way that could block; files and documents are bounded in
// size before they are parsed; a read that finds no manifest file at all while
// objects are applied is an error that keeps them; and Run applies a file changed in
// place only once it has stopped changing (Reader.Settle), while a file renamed into
// place, complete by construction, applies at once.
//
// It is a package of its own, apart from k8s.io/kube-proxy/pkg/proxy/source, because
// the Reader keeps its objects in client-go's fake clientset: a proxy on the static or
// Kubernetes source must not link that (about sixty packages and several megabytes)
// for a feature it does not use.
//
// Allowed imports: k8s.io/kube-proxy/pkg/proxy/source, the standard library,
// k8s.io/{api,apimachinery,client-go,klog,utils}, sigs.k8s.io/yaml and
// github.com/fsnotify/fsnotify. No backend.
package manifests
