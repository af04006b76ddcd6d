// Command userspaceproxy is a complete, if simple, service proxy written against this
// library: a FullState backend that listens on every TCP and UDP service address (cluster
// IPs, external IPs and load-balancer VIPs) in user space and forwards each connection (or
// UDP flow) to an endpoint chosen round-robin, honouring ClientIP session affinity and the
// internal and external traffic policies the node-local State already applied.
//
// Service addresses are added to a dummy interface the proxy owns (kube-userspace0 by
// default), so the kernel delivers traffic for them locally. Node ports and SCTP are not
// served; they are logged and skipped.
//
// It runs from a cluster or from manifest files:
//
//	userspaceproxy --kubeconfig ~/.kube/config --node node-1
//	userspaceproxy --manifests ./examples/cluster --node node-1
//
// or out of process, programming the node-local state a kube-proxy serves with
// --localnode-serve (the brain then runs in kube-proxy, not here):
//
//	userspaceproxy --socket unix:///run/kube-proxy/localnode.sock
//
// The test in this directory sends real TCP and UDP traffic through it inside private
// network namespaces, both in process and as a separate process fed over the socket. It is Linux only.
//
// Allowed imports: the library (pkg/proxy/{localnode,localnodegrpc/client,backend,source,proxyrun}), the
// standard library, client-go, klog, netlink and x/sys.
package main
