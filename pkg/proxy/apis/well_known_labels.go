package apis

// LabelServiceProxyName marks a Service as handled by a proxy other than
// kube-proxy. kube-proxy's Service informer selects only Services WITHOUT this
// label, so that alternative proxies can coexist with it on one cluster.
const LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
