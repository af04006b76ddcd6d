// Package e2e holds datapath end-to-end tests: real packets through the rules that the
// built kube-proxy binary programs into private network namespaces.
//
// Each mode (iptables, nftables, ipvs where the kernel has IPVS, and on request
// iptables on the legacy backend: KUBE_PROXY_E2E_MODES) gets its own small world of
// namespaces: a LAN
// namespace bridging two node namespaces and an external client, pod namespaces behind
// a bridge in each node, and kube-proxy running in node-1 on manifest files the tests
// write and edit. Echo servers are plain sockets opened inside the pod namespaces by
// the test process itself, so no helper processes have to be managed; they answer with
// the pod's name and the client address they saw.
//
// The tests need root, iproute2 and the mode's tools, and skip with a reason otherwise.
// They only use addresses from 198.18.0.0/15 and fd00::/8 and only send traffic inside
// the namespaces they create.
//
// May import anything; nothing imports it.
package e2e
