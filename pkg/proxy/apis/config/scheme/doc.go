// Package scheme builds the runtime.Scheme that knows every version of
// KubeProxyConfiguration, with defaulting and conversion, and the strict codecs
// over it.
//
// v1alpha1 has priority: it is what upstream writes (--write-config-to) and what
// every deployed file uses. Callers that want v1alpha2 ask for it by
// GroupVersion (see the loader package).
//
// Allowed imports: k8s.io/apimachinery and the apis/config packages of this module.
package scheme
