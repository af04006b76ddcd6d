// Package config holds the internal (unversioned) form of KubeProxyConfiguration.
//
// Every serialized version (config/v1alpha1, config/v1alpha2) converts to and from
// this form, and everything in the binary and the proxiers reads only this form, so
// it has to be able to carry every field that any version can express. Fields may be
// added here; upstream fields are never renamed or removed, because the exported API
// must stay the same as upstream Kubernetes' pkg/proxy/apis/config.
//
// Allowed imports: the standard library, k8s.io/apimachinery and
// k8s.io/component-base (config and logs API types). Nothing else from this module.
//
// +k8s:deepcopy-gen=package
// +groupName=kubeproxy.config.k8s.io
package config
