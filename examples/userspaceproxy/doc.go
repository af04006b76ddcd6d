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
// The test in this directory sends real TCP and UDP traffic through it inside private
// network namespaces. It is Linux only.
//
// Allowed imports: the library (pkg/proxy/{localnode,backend,source,proxyrun}), the
// standard library, client-go, klog, netlink and x/sys.
package main
