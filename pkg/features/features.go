package features

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/version"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	metricsfeatures "k8s.io/component-base/metrics/features"
	zpagesfeatures "k8s.io/component-base/zpages/features"
)

// Gates consulted by kube-proxy. Names match upstream Kubernetes exactly,
// because users set them by name in --feature-gates and config files.
const (
	// AllowServiceExternalIPs makes kube-proxy program Service.spec.externalIPs.
	AllowServiceExternalIPs featuregate.Feature = "AllowServiceExternalIPs"

	// PreferSameTrafficDistribution enables trafficDistribution PreferSameZone
	// and PreferSameNode (node hints).
	PreferSameTrafficDistribution featuregate.Feature = "PreferSameTrafficDistribution"

	// KubeProxyNFTablesLocalhostNodePorts makes the nftables proxier accept
	// NodePort traffic on localhost through a userspace listener.
	KubeProxyNFTablesLocalhostNodePorts featuregate.Feature = "KubeProxyNFTablesLocalhostNodePorts"

	// NFTablesNetlink makes the nftables proxier talk netlink instead of
	// executing the nft binary.
	NFTablesNetlink featuregate.Feature = "NFTablesNetlink"

	// KubeProxyIPVS allows the (deprecated) ipvs proxy mode.
	KubeProxyIPVS featuregate.Feature = "KubeProxyIPVS"

	// MultiCIDRServiceAllocator makes kube-proxy watch ServiceCIDR objects.
	MultiCIDRServiceAllocator featuregate.Feature = "MultiCIDRServiceAllocator"

	// WinDSR enables Direct Server Return in the Windows kernelspace proxier.
	WinDSR featuregate.Feature = "WinDSR"

	// WinOverlay enables overlay networks in the Windows kernelspace proxier.
	WinOverlay featuregate.Feature = "WinOverlay"
)

// EmulationVersion is the Kubernetes version whose gate stages and defaults
// kube-proxy reproduces.
var EmulationVersion = version.MustParse("1.37")

// kubeProxyGates carries the full version history, so that the gate can be
// emulated at an earlier minor version the same way upstream's can.
var kubeProxyGates = map[featuregate.Feature]featuregate.VersionedSpecs{
	AllowServiceExternalIPs: {
		{Version: version.MustParse("1.0"), Default: true, PreRelease: featuregate.GA},
	},
	PreferSameTrafficDistribution: {
		{Version: version.MustParse("1.33"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.34"), Default: true, PreRelease: featuregate.Beta},
		{Version: version.MustParse("1.35"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	KubeProxyNFTablesLocalhostNodePorts: {
		{Version: version.MustParse("1.37"), Default: false, PreRelease: featuregate.Alpha},
	},
	NFTablesNetlink: {
		{Version: version.MustParse("1.37"), Default: true, PreRelease: featuregate.Beta},
	},
	KubeProxyIPVS: {
		{Version: version.MustParse("1.0"), Default: true, PreRelease: featuregate.GA},
		{Version: version.MustParse("1.37"), Default: true, PreRelease: featuregate.Deprecated},
	},
	MultiCIDRServiceAllocator: {
		{Version: version.MustParse("1.27"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.31"), Default: false, PreRelease: featuregate.Beta},
		{Version: version.MustParse("1.33"), Default: true, PreRelease: featuregate.GA},
		{Version: version.MustParse("1.34"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	WinDSR: {
		{Version: version.MustParse("1.14"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.33"), Default: true, PreRelease: featuregate.Beta},
		{Version: version.MustParse("1.34"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	WinOverlay: {
		{Version: version.MustParse("1.14"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.20"), Default: true, PreRelease: featuregate.Beta},
		{Version: version.MustParse("1.34"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
}

var (
	// DefaultMutableFeatureGate is kube-proxy's gate. The binary applies
	// --feature-gates to it (preferably through SetFromMap); libraries read it
	// through DefaultFeatureGate.
	DefaultMutableFeatureGate featuregate.MutableVersionedFeatureGate = newGate()

	// DefaultFeatureGate is the read-only view of DefaultMutableFeatureGate.
	DefaultFeatureGate featuregate.FeatureGate = DefaultMutableFeatureGate
)

// upstreamGates is the set of gate names upstream kube-proxy accepts.
var upstreamGates = sets.New(upstreamGateNames...)

func newGate() featuregate.MutableVersionedFeatureGate {
	g := featuregate.NewVersionedFeatureGate(EmulationVersion)
	runtime.Must(AddToGate(g))
	return g
}

// AddToGate registers on g every gate the kube-proxy binary honours: its own,
// the logging, metrics and zpages gates of component-base, and client-go's.
// It is exported so that tests and embedders can build a private gate.
func AddToGate(g featuregate.MutableVersionedFeatureGate) error {
	if err := g.AddVersioned(kubeProxyGates); err != nil {
		return fmt.Errorf("registering kube-proxy feature gates: %w", err)
	}
	if err := logsapi.AddFeatureGates(g); err != nil {
		return fmt.Errorf("registering logging feature gates: %w", err)
	}
	if err := metricsfeatures.AddFeatureGates(g); err != nil {
		return fmt.Errorf("registering metrics feature gates: %w", err)
	}
	if err := zpagesfeatures.AddFeatureGates(g); err != nil {
		return fmt.Errorf("registering zpages feature gates: %w", err)
	}
	if err := clientfeatures.AddVersionedFeaturesToExistingFeatureGates(&clientGoAdapter{g}); err != nil {
		return fmt.Errorf("registering client-go feature gates: %w", err)
	}
	return nil
}

func init() {
	// Let --feature-gates drive client-go's gates, as the upstream binary does.
	clientfeatures.ReplaceFeatureGates(&clientGoAdapter{DefaultMutableFeatureGate})
}

// SetFromMap applies a --feature-gates style map to DefaultMutableFeatureGate.
// See SetGateFromMap.
func SetFromMap(logger logr.Logger, m map[string]bool) error {
	return SetGateFromMap(logger, DefaultMutableFeatureGate, m)
}

// SetGateFromMap applies m to g, tolerating cluster-wide configs: names that
// upstream Kubernetes v1.37 knows but g does not (gates of other components,
// which kube-proxy never consults) are skipped with a warning, so a config
// written for every component by kubeadm does not stop kube-proxy. Names nobody
// knows are an error naming each of them; nothing is applied in that case.
func SetGateFromMap(logger logr.Logger, g featuregate.MutableFeatureGate, m map[string]bool) error {
	known := g.GetAll()
	apply := make(map[string]bool, len(m))
	var unknown []string
	for name, enabled := range m {
		if _, ok := known[featuregate.Feature(name)]; ok {
			apply[name] = enabled
			continue
		}
		if upstreamGates.Has(name) {
			logger.Info("Warning: ignoring feature gate that kube-proxy does not use", "featureGate", name, "enabled", enabled)
			continue
		}
		unknown = append(unknown, name)
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("unrecognized feature gate(s) %s: not known to kube-proxy nor to Kubernetes v1.37", strings.Join(unknown, ", "))
	}
	if err := g.SetFromMap(apply); err != nil {
		return fmt.Errorf("applying feature gates: %w", err)
	}
	return nil
}

// IsUpstreamGate reports whether name is a feature gate of upstream
// Kubernetes v1.37 (any component).
func IsUpstreamGate(name string) bool {
	return upstreamGates.Has(name)
}

// clientGoAdapter bridges client-go's feature registry and gate interfaces to
// a component-base gate.
type clientGoAdapter struct {
	g featuregate.MutableVersionedFeatureGate
}

var (
	_ clientfeatures.Gates             = &clientGoAdapter{}
	_ clientfeatures.VersionedRegistry = &clientGoAdapter{}
)

func (a *clientGoAdapter) Enabled(name clientfeatures.Feature) bool {
	return a.g.Enabled(featuregate.Feature(name))
}

func (a *clientGoAdapter) AddVersioned(in map[clientfeatures.Feature]clientfeatures.VersionedSpecs) error {
	out := make(map[featuregate.Feature]featuregate.VersionedSpecs, len(in))
	for name, specs := range in {
		converted := make(featuregate.VersionedSpecs, 0, len(specs))
		for _, s := range specs {
			spec := featuregate.FeatureSpec{
				Default:       s.Default,
				LockToDefault: s.LockToDefault,
				Version:       s.Version,
			}
			// The pre-release types are unexported on both sides, so the
			// stages are mapped value by value.
			switch s.PreRelease {
			case clientfeatures.Alpha:
				spec.PreRelease = featuregate.Alpha
			case clientfeatures.Beta:
				spec.PreRelease = featuregate.Beta
			case clientfeatures.GA:
				spec.PreRelease = featuregate.GA
			case clientfeatures.Deprecated:
				spec.PreRelease = featuregate.Deprecated
			default:
				return fmt.Errorf("client-go feature %q: unknown pre-release stage %q", name, s.PreRelease)
			}
			converted = append(converted, spec)
		}
		out[featuregate.Feature(name)] = converted
	}
	return a.g.AddVersioned(out)
}

// Set lets client-go's test helpers override a gate.
func (a *clientGoAdapter) Set(name clientfeatures.Feature, enabled bool) error {
	return a.g.SetFromMap(map[string]bool{string(name): enabled})
}
