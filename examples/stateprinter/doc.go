// Command stateprinter is the smallest useful proxy written against this library: its
// backend prints every new revision of the node-local State, so you can see what a proxy
// on a given node would have to program, and how rarely that changes compared with the
// API events behind it.
//
//	stateprinter --manifests ./examples/cluster --node node-1
//	stateprinter --kubeconfig ~/.kube/config --node node-1 --ipv6
//
// Allowed imports: the library (pkg/proxy/{localnode,backend,source,proxyrun}), the
// standard library, client-go and klog.
package main
