// Package v1alpha1 registers k8s.io/kube-proxy/config/v1alpha1 in a scheme together
// with its defaulting and its conversion to and from the internal
// KubeProxyConfiguration, as upstream's pkg/proxy/apis/config/v1alpha1 does.
//
// Where v1alpha1 holds several values for what the internal form holds once
// (per-backend syncPeriod, minSyncPeriod and masqueradeAll), the block of the
// configured mode wins, exactly as upstream: ipvs mode reads ipvs.*, nftables mode
// nftables.*, any other mode iptables.*. LossWarnings reports what that rule drops.
//
// Allowed imports: k8s.io/apimachinery, k8s.io/component-base, k8s.io/utils,
// k8s.io/kube-proxy/config/v1alpha1 and k8s.io/kube-proxy/pkg/proxy/apis/config.
//
// +k8s:conversion-gen=k8s.io/kube-proxy/pkg/proxy/apis/config
// +k8s:conversion-gen-external-types=k8s.io/kube-proxy/config/v1alpha1
// +k8s:defaulter-gen=TypeMeta
// +k8s:defaulter-gen-input=k8s.io/kube-proxy/config/v1alpha1
// +groupName=kubeproxy.config.k8s.io
package v1alpha1
