package v1alpha2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	configv1alpha2 "k8s.io/kube-proxy/config/v1alpha2"
)

// GroupName is the API group of KubeProxyConfiguration.
const GroupName = "kubeproxy.config.k8s.io"

// SchemeGroupVersion is the version this package converts.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha2"}

var (
	// localSchemeBuilder is the external package's builder, so that registering
	// this package also registers the external types; the generated files add their
	// conversion and defaulting functions to it from their init.
	localSchemeBuilder = &configv1alpha2.SchemeBuilder
	// AddToScheme registers the v1alpha2 types, defaults and conversions.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	// Hand-written registrations only; the generated ones register themselves,
	// which keeps this package compiling while the generated files are absent.
	localSchemeBuilder.Register(addDefaultingFuncs)
}
