package backend_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	fake "k8s.io/kube-proxy/pkg/proxy/backend/testing"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// familySyncer records like fake.Incremental, and its barriers with their family.
type familySyncer struct {
	fake.Incremental
	err error
}

func (f *familySyncer) Sync(context.Context) error {
	panic("Sync called on a FamilySyncer")
}

func (f *familySyncer) SyncFamily(_ context.Context, family localnode.Family) error {
	f.SetService(family, &backend.ServiceInfo{ServicePort: localnode.ServicePort{Name: name("barrier")}})
	return f.err
}

var _ backend.FamilySyncer = &familySyncer{}

// TestDifferNamesTheFamily checks that a FamilySyncer is told which family each barrier
// closes, retries included.
func TestDifferNamesTheFamily(t *testing.T) {
	rec := &familySyncer{}
	d := backend.NewDiffer(rec)
	ctx := context.Background()
	v6 := func(svcs ...localnode.Service) *localnode.State {
		s := state(svcs...)
		s.Family = localnode.IPv6
		return s
	}
	steps := []struct {
		name  string
		state *localnode.State
		err   error
		want  []string
	}{
		{name: "IPv4", state: state(svc("a", "10.0.0.1")),
			want: []string{"set-svc IPv4 ns/a:p/TCP", "set-svc IPv4 ns/barrier:p/TCP"}},
		{name: "IPv6", state: v6(svc("a", "fd00::1")),
			want: []string{"set-svc IPv6 ns/a:p/TCP", "set-svc IPv6 ns/barrier:p/TCP"}},
		{name: "IPv6 fails", state: v6(), err: errors.New("boom"),
			want: []string{"del-svc IPv6 ns/a:p/TCP", "set-svc IPv6 ns/barrier:p/TCP"}},
		{name: "IPv6 retried with no calls: still named", state: v6(),
			want: []string{"set-svc IPv6 ns/barrier:p/TCP"}},
	}
	for _, s := range steps {
		rec.err = s.err
		err := d.Sync(ctx, s.state)
		if !errors.Is(err, s.err) {
			t.Errorf("%s: Sync = %v, want %v", s.name, err, s.err)
		}
		if diff := cmp.Diff(s.want, rec.Take()); diff != "" {
			t.Errorf("%s: calls (-want +got):\n%s", s.name, diff)
		}
	}
}
