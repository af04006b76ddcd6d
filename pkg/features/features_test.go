package features

import (
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	metricsfeatures "k8s.io/component-base/metrics/features"
)

func TestDefaults(t *testing.T) {
	tests := []struct {
		gate    featuregate.Feature
		enabled bool
		stage   featuregate.FeatureSpec
	}{
		{AllowServiceExternalIPs, true, featuregate.FeatureSpec{PreRelease: featuregate.GA}},
		{PreferSameTrafficDistribution, true, featuregate.FeatureSpec{PreRelease: featuregate.GA, LockToDefault: true}},
		{KubeProxyNFTablesLocalhostNodePorts, false, featuregate.FeatureSpec{PreRelease: featuregate.Alpha}},
		{NFTablesNetlink, true, featuregate.FeatureSpec{PreRelease: featuregate.Beta}},
		{KubeProxyIPVS, true, featuregate.FeatureSpec{PreRelease: featuregate.Deprecated}},
		{MultiCIDRServiceAllocator, true, featuregate.FeatureSpec{PreRelease: featuregate.GA, LockToDefault: true}},
		{WinDSR, true, featuregate.FeatureSpec{PreRelease: featuregate.GA, LockToDefault: true}},
		{WinOverlay, true, featuregate.FeatureSpec{PreRelease: featuregate.GA, LockToDefault: true}},
		{"LoggingAlphaOptions", false, featuregate.FeatureSpec{PreRelease: featuregate.Alpha}},
		{"LoggingBetaOptions", true, featuregate.FeatureSpec{PreRelease: featuregate.Beta}},
		{"ContextualLogging", true, featuregate.FeatureSpec{PreRelease: featuregate.Beta}},
		{"NativeHistograms", true, featuregate.FeatureSpec{PreRelease: featuregate.Beta}},
		{"ComponentFlagz", true, featuregate.FeatureSpec{PreRelease: featuregate.Beta}},
		{"ComponentStatusz", true, featuregate.FeatureSpec{PreRelease: featuregate.Beta}},
		{"WatchListClient", DefaultFeatureGate.Enabled("WatchListClient"), featuregate.FeatureSpec{}},
	}
	all := DefaultMutableFeatureGate.GetAll()
	for _, tc := range tests {
		t.Run(string(tc.gate), func(t *testing.T) {
			spec, ok := all[tc.gate]
			if !ok {
				t.Fatalf("gate %s not registered", tc.gate)
			}
			if got := DefaultFeatureGate.Enabled(tc.gate); got != tc.enabled {
				t.Errorf("Enabled(%s) = %v, want %v", tc.gate, got, tc.enabled)
			}
			if tc.stage.PreRelease != "" {
				if spec.PreRelease != tc.stage.PreRelease || spec.LockToDefault != tc.stage.LockToDefault {
					t.Errorf("%s: stage %s locked=%v, want %s locked=%v", tc.gate, spec.PreRelease, spec.LockToDefault, tc.stage.PreRelease, tc.stage.LockToDefault)
				}
			}
		})
	}
}

func TestOwnGatesAreUpstreamGates(t *testing.T) {
	// Every gate we register must exist upstream under the same name, or a
	// config written for kube-proxy would not be portable back.
	for name := range kubeProxyGates {
		if !IsUpstreamGate(string(name)) {
			t.Errorf("gate %s is not an upstream v1.37 gate name", name)
		}
	}
	for _, name := range []string{"AllowServiceExternalIPs", "CustomCPUCFSQuotaPeriod", "DynamicResourceAllocation", "APIResponseCompression"} {
		if !IsUpstreamGate(name) {
			t.Errorf("expected %s in the upstream list", name)
		}
	}
}

type logLine struct {
	prefix, args string
}

func captureLogger() (logr.Logger, *[]logLine) {
	var lines []logLine
	return funcr.New(func(prefix, args string) {
		lines = append(lines, logLine{prefix, args})
	}, funcr.Options{}), &lines
}

func TestSetGateFromMap(t *testing.T) {
	tests := []struct {
		name        string
		in          map[string]bool
		wantErr     []string // substrings
		wantWarned  []string
		wantEnabled map[featuregate.Feature]bool
	}{
		{
			name:        "own gate applied",
			in:          map[string]bool{"KubeProxyNFTablesLocalhostNodePorts": true, "NFTablesNetlink": false},
			wantEnabled: map[featuregate.Feature]bool{KubeProxyNFTablesLocalhostNodePorts: true, NFTablesNetlink: false},
		},
		{
			name:        "logging gate applied",
			in:          map[string]bool{"LoggingAlphaOptions": true},
			wantEnabled: map[featuregate.Feature]bool{"LoggingAlphaOptions": true},
		},
		{
			name:        "kubeadm-style cluster-wide gates are ignored with a warning",
			in:          map[string]bool{"DynamicResourceAllocation": true, "CustomCPUCFSQuotaPeriod": true, "KubeProxyIPVS": false},
			wantWarned:  []string{"CustomCPUCFSQuotaPeriod", "DynamicResourceAllocation"},
			wantEnabled: map[featuregate.Feature]bool{KubeProxyIPVS: false},
		},
		{
			name:        "unknown gate is an error naming it, nothing applied",
			in:          map[string]bool{"NoSuchGate": true, "AlsoMissing": false, "KubeProxyNFTablesLocalhostNodePorts": true},
			wantErr:     []string{"AlsoMissing, NoSuchGate"},
			wantEnabled: map[featuregate.Feature]bool{KubeProxyNFTablesLocalhostNodePorts: false},
		},
		{
			name:    "locked gate cannot be changed",
			in:      map[string]bool{"PreferSameTrafficDistribution": false},
			wantErr: []string{"PreferSameTrafficDistribution"},
		},
		{
			name: "AllAlpha special gate is accepted",
			in:   map[string]bool{"AllAlpha": false},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := featuregate.NewVersionedFeatureGate(EmulationVersion)
			if err := AddToGate(g); err != nil {
				t.Fatal(err)
			}
			logger, lines := captureLogger()
			err := SetGateFromMap(logger, g, tc.in)
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			for _, s := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("error %v does not mention %q", err, s)
				}
			}
			if len(*lines) != len(tc.wantWarned) {
				t.Errorf("got %d log lines %v, want warnings for %v", len(*lines), *lines, tc.wantWarned)
			}
			for _, w := range tc.wantWarned {
				found := false
				for _, l := range *lines {
					if strings.Contains(l.args, `"`+w+`"`) && strings.Contains(l.args, "ignoring feature gate") {
						found = true
					}
				}
				if !found {
					t.Errorf("no warning for %s in %v", w, *lines)
				}
			}
			for gate, want := range tc.wantEnabled {
				if got := g.Enabled(gate); got != want {
					t.Errorf("Enabled(%s) = %v, want %v", gate, got, want)
				}
			}
		})
	}
}

func TestClientGoAdapter(t *testing.T) {
	g := featuregate.NewVersionedFeatureGate(EmulationVersion)
	if err := AddToGate(g); err != nil {
		t.Fatal(err)
	}
	a := &clientGoAdapter{g}
	before := a.Enabled("WatchListClient")
	if err := a.Set("WatchListClient", !before); err != nil {
		t.Fatal(err)
	}
	if a.Enabled("WatchListClient") == before {
		t.Error("Set through the client-go adapter had no effect")
	}
}

func TestComponentGatesCanBeAddedAgain(t *testing.T) {
	// The binary (like upstream's) may register the logging and metrics gates
	// itself; doing so on our gate, which already has them, must be harmless.
	if err := logsapi.AddFeatureGates(DefaultMutableFeatureGate); err != nil {
		t.Errorf("logsapi.AddFeatureGates: %v", err)
	}
	if err := metricsfeatures.AddFeatureGates(DefaultMutableFeatureGate); err != nil {
		t.Errorf("metricsfeatures.AddFeatureGates: %v", err)
	}
}

// TestUpstreamBinaryGates checks against the gate names the upstream v1.37.2
// kube-proxy binary accepts (testdata/upstream-v1.37.2-binary-gates.txt:
// k8s.io/apiserver's DefaultMutableFeatureGate.GetAll() after importing
// k8s.io/kubernetes/cmd/kube-proxy/app, captured outside this repository):
// a config naming every one of them must be accepted, and we must know no
// name upstream does not.
func TestUpstreamBinaryGates(t *testing.T) {
	data, err := os.ReadFile("testdata/upstream-v1.37.2-binary-gates.txt")
	if err != nil {
		t.Fatal(err)
	}
	upstream := sets.New(strings.Fields(string(data))...)
	if upstream.Len() < 200 {
		t.Fatalf("only %d upstream gate names read", upstream.Len())
	}

	g := featuregate.NewVersionedFeatureGate(EmulationVersion)
	if err := AddToGate(g); err != nil {
		t.Fatal(err)
	}
	ours := sets.New(upstreamGateNames...)
	for name := range g.GetAll() {
		ours.Insert(string(name))
	}
	// AllAlpha/AllBeta are pseudo-gates every component-base gate has.
	ours.Delete("AllAlpha", "AllBeta")
	upstream.Delete("AllAlpha", "AllBeta")
	if missing := upstream.Difference(ours); missing.Len() > 0 {
		t.Errorf("upstream gates we do not know: %v", sets.List(missing))
	}
	if extra := ours.Difference(upstream); extra.Len() > 0 {
		t.Errorf("gates we know that upstream does not: %v", sets.List(extra))
	}

	// Every upstream name at once, our own gates at their current value
	// (locked ones cannot be changed), the rest at anything.
	all := map[string]bool{}
	for name := range upstream {
		all[name] = true
		if _, ok := g.GetAll()[featuregate.Feature(name)]; ok {
			all[name] = g.Enabled(featuregate.Feature(name))
		}
	}
	logger, _ := captureLogger()
	if err := SetGateFromMap(logger, g, all); err != nil {
		t.Errorf("a config naming every upstream gate was rejected: %v", err)
	}
}
