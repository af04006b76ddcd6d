// Package localnodeportproxy serves NodePorts on the loopback address in
// userspace for the nftables backend, which cannot DNAT traffic to 127.0.0.1
// the way iptables mode does with route_localnet. Each TCP NodePort gets a
// listener on 127.0.0.1 (or ::1) that forwards connections to the service's
// endpoints, honouring ClientIP session affinity.
//
// Allowed imports: k8s.io/kube-proxy/pkg/proxy (ServicePortName) and
// pkg/proxy/metrics, plus the standard library and k8s.io/{api,klog,utils}.
package localnodeportproxy
