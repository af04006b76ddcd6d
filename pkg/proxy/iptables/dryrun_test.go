//go:build linux

package iptables

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2/ktesting"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	sysctltest "k8s.io/net-utils/sysctl/testing"
)

// newDryRunProxier is a proxier in WithDryRun mode writing to out, with no
// iptables interface at all, as cmd/kube-proxy builds it.
func newDryRunProxier(t testing.TB, f fam, cfg envConfig, out *bytes.Buffer) (*Proxier, *sysctltest.Fake) {
	t.Helper()
	sc := sysctltest.NewFake()
	_, ctx := ktesting.NewTestContext(t)
	p, err := NewProxierWithOptions(ctx, newTestConfig(cfg), f.family, nil, sc,
		proxyutil.NewDetectLocalByCIDR(f.clusterCIDR), testNodeName, nil, nil, nil, false, proxieropts.WithDryRun(out))
	if err != nil {
		t.Fatal(err)
	}
	return p, sc
}

// TestDryRunGolden pins the exact dry-run output of a full sync, a partial
// sync (one endpoint changed), a Service removal (stale chains deleted) and a
// requested full sync, as `kube-proxy --dry-run` prints it. Regenerate with
// `go test -run TestDryRunGolden -update`.
func TestDryRunGolden(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			var out bytes.Buffer
			p, sc := newDryRunProxier(t, f, envConfig{}, &out)
			sc2 := representativeCluster(f)
			for _, s := range sc2.services {
				p.OnServiceAdd(s)
			}
			for _, s := range sc2.slices {
				p.OnEndpointSliceAdd(s)
			}
			p.OnServiceSynced()
			p.OnEndpointSlicesSynced()

			p.OnEndpointSliceUpdate(sc2.slices[0], f.stdSlice(st.EP{IP: f.pod(7), Node: testNodeName}))
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			p.OnServiceDelete(sc2.services[1])
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			p.RequestFullSync()
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if w := sc.Writes; len(w) != 0 {
				t.Errorf("dry run wrote sysctls: %v", w)
			}

			got := out.String()
			path := filepath.Join("testdata", "dry-run-"+strings.ToLower(string(f.family))+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(want, []byte(got)) {
				t.Errorf("%s differs from the current output (run with -update if the change is intended):\n%s", path, lineDiff(string(want), got))
			}
		})
	}
}

// A sync the proxier makes full on its own (the cluster crossed the large
// cluster threshold, so every comment changes) is printed as a full sync,
// with the jump rules a full sync ensures.
func TestDryRunLargeClusterSwitchIsFull(t *testing.T) {
	f := families[0]
	var out bytes.Buffer
	p, _ := newDryRunProxier(t, f, envConfig{}, &out)
	svcs, slcs := manyServices(f, 100, largeClusterEndpointsThreshold/100)
	for _, s := range svcs {
		p.OnServiceAdd(s)
	}
	for _, s := range slcs {
		p.OnEndpointSliceAdd(s)
	}
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	if p.gen.large {
		t.Fatalf("%d endpoints already count as a large cluster", largeClusterEndpointsThreshold)
	}
	out.Reset()
	updateSlice(p, slcs, 0, func(s *discovery.EndpointSlice) {
		s.Endpoints = append(s.Endpoints, s.Endpoints[0])
		s.Endpoints[len(s.Endpoints)-1].Addresses = []string{f.podIndex(900000)}
	})
	if err := p.SyncNow(); err != nil {
		t.Fatal(err)
	}
	if !p.gen.large {
		t.Fatal("not in large cluster mode after crossing the threshold")
	}
	text := out.String()
	if want := "# kube-proxy iptables dry run: family=IPv4 fullSync=true\n"; !strings.HasPrefix(text, want) {
		t.Errorf("output starts %q, want %q", firstLine(text), want)
	}
	if got, want := strings.Count(text, "\n# ensure: "), 2*(len(jumpRules)+len(kubeletJumpRules)); got != want {
		t.Errorf("%d ensure lines, want %d", got, want)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// WithSyncHook hears every sync, full or partial, with its outcome.
func TestWithSyncHook(t *testing.T) {
	f := families[0]
	var results []syncshell.SyncResult
	var out bytes.Buffer
	_, ctx := ktesting.NewTestContext(t)
	p, err := NewProxierWithOptions(ctx, newTestConfig(envConfig{}), f.family, nil, sysctltest.NewFake(),
		nil, testNodeName, nil, nil, nil, false, proxieropts.WithDryRun(&out),
		proxieropts.WithSyncHook(func(r syncshell.SyncResult) { results = append(results, r) }))
	if err != nil {
		t.Fatal(err)
	}
	p.OnServiceAdd(f.stdService(nil))
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	p.OnEndpointSliceAdd(f.stdSlice())
	if err := p.SyncNow(); err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || !results[0].Full || results[1].Full || results[0].Err != nil || results[1].Err != nil || results[0].Family != f.family {
		t.Errorf("sync hook heard %+v, want a full then a partial sync of %s, both without error", results, f.family)
	}
}
