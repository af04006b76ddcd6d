package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/v1alpha1"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/v1alpha2"
)

var (
	// Scheme knows the internal KubeProxyConfiguration and both external versions.
	Scheme = runtime.NewScheme()
	// Codecs decodes strictly: unknown and duplicate fields are errors.
	Codecs = serializer.NewCodecFactory(Scheme, serializer.EnableStrict)
)

func init() {
	AddToScheme(Scheme)
}

// AddToScheme registers the internal type and both versions, defaults and
// conversions included, with v1alpha1 preferred. It panics only on a programming
// error (conflicting registrations), like every upstream AddToScheme helper.
func AddToScheme(scheme *runtime.Scheme) {
	utilruntime.Must(config.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	utilruntime.Must(v1alpha2.AddToScheme(scheme))
	utilruntime.Must(scheme.SetVersionPriority(v1alpha1.SchemeGroupVersion, v1alpha2.SchemeGroupVersion))
}
