// Package features holds kube-proxy's feature gates: the gates kube-proxy code
// consults (same names, stages and defaults as upstream Kubernetes v1.37), the
// component-base and client-go gates the binary honours, and a tolerant way to
// apply --feature-gates maps written for a whole Kubernetes cluster.
//
// The gate lives here, owned by kube-proxy, instead of in k8s.io/apiserver's
// global gate, so that importing kube-proxy packages never pulls in the API
// server.
//
// Allowed imports: the standard library, k8s.io/component-base (featuregate,
// logs/api/v1, metrics/features, zpages/features), k8s.io/client-go/features,
// k8s.io/apimachinery and k8s.io/klog. Nothing else from this module.
package features
