package metaproxier_test

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy/metaproxier"
	metatesting "k8s.io/kube-proxy/pkg/proxy/metaproxier/testing"
)

func TestNewDualStack(t *testing.T) {
	for _, tc := range []struct {
		name     string
		initOnly bool
		failOn   v1.IPFamily
		wantErr  string
		wantNil  bool
	}{
		{name: "both built", wantNil: false},
		{name: "init only builds both and returns nothing", initOnly: true, wantNil: true},
		{name: "IPv4 fails", failOn: v1.IPv4Protocol, wantErr: "creating the IPv4 proxier: boom", wantNil: true},
		{name: "IPv6 fails", failOn: v1.IPv6Protocol, wantErr: "creating the IPv6 proxier: boom", wantNil: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			built := map[v1.IPFamily]*metatesting.RecordingProvider{}
			p, err := metaproxier.NewDualStack(tc.initOnly, func(f v1.IPFamily) (*metatesting.RecordingProvider, error) {
				if f == tc.failOn {
					return nil, errors.New("boom")
				}
				built[f] = metatesting.NewRecordingProvider()
				return built[f], nil
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if (p == nil) != tc.wantNil {
				t.Fatalf("provider = %v, want nil: %v", p, tc.wantNil)
			}
			if p != nil {
				p.Sync()
				for _, f := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
					if calls := built[f].Calls(); len(calls) != 1 || calls[0] != "Sync()" {
						t.Errorf("%s proxier calls = %v, want [Sync()]", f, calls)
					}
				}
			}
		})
	}
}
