// Package v1alpha1 is version v1alpha1 of KubeProxyConfiguration, the format every
// existing kube-proxy configuration file is written in.
//
// Its types, field names and JSON names are those of upstream
// k8s.io/kube-proxy/config/v1alpha1 at v0.37.2, so that files (and programs such as
// kubeadm that import this package) keep working unchanged. Defaulting and conversion
// live in k8s.io/kube-proxy/pkg/proxy/apis/config/v1alpha1, as upstream.
//
// Allowed imports: k8s.io/apimachinery and the k8s.io/component-base config and logs
// API types only.
//
// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +k8s:openapi-model-package=io.k8s.kube-proxy.config.v1alpha1
// +groupName=kubeproxy.config.k8s.io
package v1alpha1
