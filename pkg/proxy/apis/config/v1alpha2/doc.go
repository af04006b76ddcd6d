// Package v1alpha2 registers k8s.io/kube-proxy/config/v1alpha2 in a scheme together
// with its defaulting and its conversion to and from the internal
// KubeProxyConfiguration.
//
// v1alpha2 lines up with the internal form almost field for field. The one
// internal field it lacks is BindAddress (v1alpha1's primary-IP override), which
// nodeIPOverride replaces: reading v1alpha2 sets BindAddress to the first
// nodeIPOverride (or "0.0.0.0"), so code written against upstream's internal type
// sees the override; writing v1alpha2 from a configuration that only has a specific
// BindAddress makes it the single nodeIPOverride.
//
// Allowed imports: k8s.io/apimachinery, k8s.io/component-base, k8s.io/utils,
// k8s.io/kube-proxy/config/v1alpha2 and k8s.io/kube-proxy/pkg/proxy/apis/config.
//
// +k8s:conversion-gen=k8s.io/kube-proxy/pkg/proxy/apis/config
// +k8s:conversion-gen-external-types=k8s.io/kube-proxy/config/v1alpha2
// +k8s:defaulter-gen=TypeMeta
// +k8s:defaulter-gen-input=k8s.io/kube-proxy/config/v1alpha2
// +groupName=kubeproxy.config.k8s.io
package v1alpha2
