// Package v1alpha2 is version v1alpha2 of KubeProxyConfiguration, the layout
// proposed by KEP-784 (kube-proxy component config graduation).
//
// Compared with v1alpha1: options that hold for every backend of a platform moved
// into the linux and windows sections; the per-backend sync periods and
// masqueradeAll became single top-level or linux fields; clusterCIDR became the
// list detectLocal.clusterCIDRs; bindAddress and portRange are gone
// (nodeIPOverride replaces bindAddress); configHardFail, nodeIPOverride,
// ipFamilyPolicy, ipvs.masqueradeBit and windows.runAsService are new. See
// docs/config-v1alpha2.md for the field-by-field mapping.
//
// Defaulting and conversion live in k8s.io/kube-proxy/pkg/proxy/apis/config/v1alpha2.
//
// Allowed imports: k8s.io/apimachinery and the k8s.io/component-base config and logs
// API types only.
//
// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +k8s:openapi-model-package=io.k8s.kube-proxy.config.v1alpha2
// +groupName=kubeproxy.config.k8s.io
package v1alpha2
