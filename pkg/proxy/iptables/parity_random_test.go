//go:build linux

package iptables

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// TestUpstreamParityRandom extends TestUpstreamParity to random clusters:
// testdata/upstream-v1.37.2-random/<family>-<n>.json are clusters built by
// clusterModel (every service type, both traffic policies, affinity,
// source ranges, external IPs, local/remote/terminating/not-ready
// endpoints, several ports), and <family>-<n>.upstream.txt is the restore
// input upstream v1.37.2 wrote for each in one full sync (captured with
// testdata/upstream-baseline/randparity_test.go, see UPSTREAM-CAPTURE.md).
// Ours must hold the same lines, also under configuration variants
// (masqueradeAll, localhost node ports off, no local-traffic detector,
// nf_conntrack_tcp_be_liberal set).
func TestUpstreamParityRandom(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "upstream-v1.37.2-random", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no captured clusters")
	}
	// Configuration variants, captured for clusters 0-3 of each family.
	variants := map[string]envConfig{
		"":            {},
		"masqall":     {masqueradeAll: true},
		"nolocalhost": {localhostNodePorts: ptr.To(false)},
		"nodetect":    {detector: "none"},
		"liberal":     {beLiberal: true},
	}
	compared := 0
	for _, file := range files {
		for variant, cfg := range variants {
			upstreamFile := strings.TrimSuffix(file, ".json") + ".upstream.txt"
			if variant != "" {
				upstreamFile = strings.TrimSuffix(file, ".json") + "." + variant + ".upstream.txt"
			}
			if _, err := os.Stat(upstreamFile); err != nil {
				continue
			}
			compared++
			name := strings.TrimSuffix(filepath.Base(file), ".json")
			if variant != "" {
				name += "/" + variant
			}
			t.Run(name, func(t *testing.T) { compareWithUpstream(t, file, upstreamFile, cfg) })
		}
	}
	if compared != 16+4*8 {
		t.Errorf("compared %d captures, want %d", compared, 16+4*8)
	}
}

func compareWithUpstream(t *testing.T, file, upstreamFile string, cfg envConfig) {
	name := strings.TrimSuffix(filepath.Base(file), ".json")
	f := families[0]
	if strings.HasPrefix(name, "ipv6") {
		f = families[1]
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Services []*v1.Service
		Slices   []*discovery.EndpointSlice
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	upstream, err := os.ReadFile(upstreamFile)
	if err != nil {
		t.Fatal(err)
	}
	// nfacct available, as it was for upstream run as root.
	cfg.nfacct = true
	env := setupScenario(t, f, scenario{cfg: cfg, services: in.Services, slices: in.Slices})
	ours := strings.Split(strings.TrimSpace(env.restore[len(env.restore)-1]), "\n")
	theirs := strings.Split(strings.TrimSpace(string(upstream)), "\n")
	slices.Sort(ours)
	slices.Sort(theirs)
	if !slices.Equal(ours, theirs) {
		t.Errorf("output differs from upstream v1.37.2 (- upstream only, + ours only):\n%s", lineDiff(strings.Join(theirs, "\n"), strings.Join(ours, "\n")))
	}
}
