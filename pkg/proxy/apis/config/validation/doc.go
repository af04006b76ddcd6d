// Package validation checks an internal KubeProxyConfiguration, returning every
// problem with its field path (Validate), and lists what is legal but probably not
// what the user meant (Warnings, LossWarningsV1alpha1, EncodingWarnings).
//
// The rules are upstream's v1.37 rules, field paths included, plus rules for the
// fields v1alpha2 added (NodeIPOverride, IPFamilyPolicy, IPVS.MasqueradeBit).
//
// Allowed imports: k8s.io/apimachinery, k8s.io/component-base, k8s.io/utils,
// k8s.io/klog, k8s.io/kube-proxy/pkg/features, k8s.io/kube-proxy/config/... and
// the apis/config packages of this module.
package validation
