//go:build linux

package iptables

import (
	"testing"

	discovery "k8s.io/api/discovery/v1"
)

// TestDriftNothingChangedLargeCluster: above largeClusterEndpointsThreshold
// rules lose their comments and stale chains are deleted once per period;
// a check of an untouched kernel still finds nothing.
func TestDriftNothingChangedLargeCluster(t *testing.T) {
	f := families[0]
	env := newTestEnv(t, f, envConfig{})
	svcs, slices := manyServicesNodePort(f, 300, 4)
	for _, s := range svcs {
		env.p.OnServiceAdd(s)
	}
	for _, s := range slices {
		env.p.OnEndpointSliceAdd(s)
	}
	env.start(t)
	if !env.p.gen.large {
		t.Fatal("not in large cluster mode")
	}
	check := func(stage string) {
		t.Helper()
		drifts, err := (*rulesBackend)(env.p).Drift(env.ctx)
		if err != nil || len(drifts) != 0 {
			t.Fatalf("%s: %d drifts %+v, %v", stage, len(drifts), drifts[:min(5, len(drifts))], err)
		}
	}
	check("full sync")
	updateSlice(env.p, slices, 0, func(s *discovery.EndpointSlice) { s.Endpoints[0].Addresses = []string{f.podIndex(5000)} })
	env.sync(t)
	check("endpoint moved")
	env.p.OnServiceDelete(svcs[1])
	env.sync(t)
	check("service deleted")
}
