package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	proxytesting "k8s.io/kube-proxy/pkg/proxy/metaproxier/testing"
)

// builtFamily is what a fake mode was asked to build, in comparable form.
type builtFamily struct {
	Family   v1.IPFamily
	NodeIP   string
	IfLocal  string
	DryRun   bool
	InitOnly bool
}

// TestNewProxiers checks the per-family setup every mode shares: which families get a
// proxier, with which node IP, local-traffic detector and dry-run sink, and what is
// returned over them.
func TestNewProxiers(t *testing.T) {
	v4, v6 := v1.IPv4Protocol, v1.IPv6Protocol
	nodeIPs := map[v1.IPFamily]net.IP{v4: net.ParseIP("198.18.0.10"), v6: net.ParseIP("fd00:18::10")}
	errBoom := errors.New("boom")
	tests := []struct {
		name      string
		primary   v1.IPFamily
		dualStack bool
		initOnly  bool
		dryRun    bool
		failOn    v1.IPFamily
		want      []builtFamily
		// wantFrom is the families whose proxiers the result forwards a Sync to; nil
		// means the result is nil.
		wantFrom []v1.IPFamily
		wantErr  string
	}{
		{
			name: "IPv4 single-stack", primary: v4,
			want:     []builtFamily{{Family: v4, NodeIP: "198.18.0.10", IfLocal: "-s 198.19.0.0/16"}},
			wantFrom: []v1.IPFamily{v4},
		},
		{
			name: "IPv6 single-stack", primary: v6,
			want:     []builtFamily{{Family: v6, NodeIP: "fd00:18::10", IfLocal: "-s fd00:1::/48"}},
			wantFrom: []v1.IPFamily{v6},
		},
		{
			name: "dual-stack, IPv6 primary: both families, IPv4 first, under a metaproxier", primary: v6, dualStack: true,
			want: []builtFamily{
				{Family: v4, NodeIP: "198.18.0.10", IfLocal: "-s 198.19.0.0/16"},
				{Family: v6, NodeIP: "fd00:18::10", IfLocal: "-s fd00:1::/48"},
			},
			wantFrom: []v1.IPFamily{v4, v6},
		},
		{
			name: "init only: every family prepares the host, nothing is returned", primary: v4, dualStack: true, initOnly: true,
			want: []builtFamily{
				{Family: v4, NodeIP: "198.18.0.10", IfLocal: "-s 198.19.0.0/16", InitOnly: true},
				{Family: v6, NodeIP: "fd00:18::10", IfLocal: "-s fd00:1::/48", InitOnly: true},
			},
		},
		{
			name: "dry run: each family writes to its own sink", primary: v4, dualStack: true, dryRun: true,
			want: []builtFamily{
				{Family: v4, NodeIP: "198.18.0.10", IfLocal: "-s 198.19.0.0/16", DryRun: true},
				{Family: v6, NodeIP: "fd00:18::10", IfLocal: "-s fd00:1::/48", DryRun: true},
			},
			wantFrom: []v1.IPFamily{v4, v6},
		},
		{
			name: "a family's failure names the family", primary: v4, dualStack: true, failOn: v6,
			want: []builtFamily{
				{Family: v4, NodeIP: "198.18.0.10", IfLocal: "-s 198.19.0.0/16"},
				{Family: v6, NodeIP: "fd00:18::10", IfLocal: "-s fd00:1::/48"},
			},
			wantErr: "IPv6 proxier: boom",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var built []builtFamily
			providers := map[v1.IPFamily]*proxytesting.RecordingProvider{}
			mode := proxierMode{
				dryRunKind: "test script",
				newProxier: func(_ context.Context, _ *ProxyServer, f familySetup) (proxy.Provider, error) {
					built = append(built, builtFamily{
						Family: f.family, NodeIP: f.nodeIP.String(), IfLocal: strings.Join(f.localDetector.IfLocal(), " "),
						DryRun: f.dryRun != nil, InitOnly: f.initOnly,
					})
					if f.family == tc.failOn {
						return nil, errBoom
					}
					if f.dryRun != nil {
						fmt.Fprintf(f.dryRun, "%s rules\n", f.family)
					}
					if f.initOnly {
						return asProvider[proxytesting.RecordingProvider](nil, nil)
					}
					providers[f.family] = proxytesting.NewRecordingProvider()
					return providers[f.family], nil
				},
			}
			s := &ProxyServer{
				Config: &kubeproxyconfig.KubeProxyConfiguration{
					DetectLocalMode: kubeproxyconfig.LocalModeClusterCIDR,
					DetectLocal:     kubeproxyconfig.DetectLocalConfiguration{ClusterCIDRs: []string{"198.19.0.0/16", "fd00:1::/48"}},
				},
				PrimaryIPFamily: tc.primary,
				NodeIPs:         nodeIPs,
			}
			if tc.dryRun {
				s.dryRun = newDryRunOutput()
			}

			p, err := s.newProxiers(context.Background(), mode, tc.dualStack, tc.initOnly)
			if diff := cmp.Diff(tc.want, built); diff != "" {
				t.Errorf("families built (-want +got):\n%s", diff)
			}
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !errors.Is(err, errBoom) {
					t.Fatalf("error = %v, want %q wrapping the mode's", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantFrom == nil {
				if p != nil {
					t.Fatalf("got a Provider %T, want nil", p)
				}
				return
			}
			p.Sync()
			for family, rp := range providers {
				if got := rp.Calls(); len(got) != 1 || got[0] != "Sync()" {
					t.Errorf("%s proxier got %v from the returned Provider, want [Sync()]", family, got)
				}
			}
			if len(providers) != len(tc.wantFrom) {
				t.Errorf("built %d proxiers, want %d", len(providers), len(tc.wantFrom))
			}
			if tc.dryRun {
				for _, family := range tc.wantFrom {
					if got := s.dryRun.bufs[family].String(); got != string(family)+" rules\n" || s.dryRun.kinds[family] != "test script" {
						t.Errorf("%s dry-run sink holds %q as %q", family, got, s.dryRun.kinds[family])
					}
				}
			}
		})
	}
}

// TestAsProvider checks that a constructor's nil proxier becomes a nil Provider, which
// a typed nil pointer in an interface would not be.
func TestAsProvider(t *testing.T) {
	errBad := errors.New("bad")
	rp := proxytesting.NewRecordingProvider()
	tests := []struct {
		name    string
		p       *proxytesting.RecordingProvider
		err     error
		wantNil bool
	}{
		{name: "a proxier", p: rp},
		{name: "no proxier (initOnly)", wantNil: true},
		{name: "an error", p: rp, err: errBad, wantNil: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := asProvider(tc.p, tc.err)
			if err != tc.err {
				t.Errorf("error = %v, want %v", err, tc.err)
			}
			if (got == nil) != tc.wantNil {
				t.Errorf("Provider = %#v, want nil: %v", got, tc.wantNil)
			}
		})
	}
}
