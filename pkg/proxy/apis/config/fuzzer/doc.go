// Package fuzzer provides randfill functions that produce internal
// KubeProxyConfigurations for apimachinery's round-trip tests. Test use only.
//
// Not every internal configuration survives every version: v1alpha1 has no
// NodeIPOverride, IPFamilyPolicy, ConfigHardFail, LocalNode, SocketLB or separate
// ipvs masquerade bit, and v1alpha2 has no BindAddress. So there is one set of functions per version
// (V1alpha1Funcs, V1alpha2Funcs), each covering everything that version can
// carry, and Funcs for the configurations both carry, for round-tripping through
// the full scheme as upstream does.
//
// Allowed imports: k8s.io/apimachinery, sigs.k8s.io/randfill, k8s.io/utils and
// k8s.io/kube-proxy/pkg/proxy/apis/config.
package fuzzer
