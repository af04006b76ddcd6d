package proxyrun

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	fake "k8s.io/kube-proxy/pkg/proxy/backend/testing"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// TestInitialSignal checks that Synced closes only once both synced signals have reached
// every family, and that SyncReport refuses to sync before that.
func TestInitialSignal(t *testing.T) {
	tests := []struct {
		name    string
		signals func(p *Proxy)
		want    bool
	}{
		{name: "nothing", signals: func(*Proxy) {}},
		{name: "services only", signals: func(p *Proxy) { p.OnServiceSynced() }},
		{name: "slices only", signals: func(p *Proxy) { p.OnEndpointSlicesSynced() }},
		{name: "both", signals: func(p *Proxy) { p.OnEndpointSlicesSynced(); p.OnServiceSynced() }, want: true},
		{name: "both, twice", signals: func(p *Proxy) {
			p.OnServiceSynced()
			p.OnEndpointSlicesSynced()
			p.OnServiceSynced()
			p.OnEndpointSlicesSynced()
		}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewFullState()
			p, err := New(b, Options{NodeName: node, Families: []localnode.Family{localnode.IPv4, localnode.IPv6}})
			if err != nil {
				t.Fatal(err)
			}
			p.OnServiceAdd(st.Service("ns", "web", v4))
			tc.signals(p)
			select {
			case <-p.Synced():
				if !tc.want {
					t.Fatal("Synced closed before both signals")
				}
			default:
				if tc.want {
					t.Fatal("Synced not closed after both signals")
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			if err := p.WaitForInitial(ctx); (err == nil) != tc.want {
				t.Errorf("WaitForInitial = %v", err)
			}
			changed, err := p.SyncReport(context.Background())
			if !tc.want {
				if !errors.Is(err, ErrNotSynced) || changed {
					t.Errorf("SyncReport before the initial objects = %v, %v; want false, ErrNotSynced", changed, err)
				}
				if len(b.Attempts()) != 0 {
					t.Errorf("backend called before the initial objects: %d calls", len(b.Attempts()))
				}
				return
			}
			if err != nil || !changed {
				t.Errorf("first SyncReport = %v, %v; want true, nil", changed, err)
			}
		})
	}
}

// TestSyncReport checks what SyncReport says after each kind of change.
func TestSyncReport(t *testing.T) {
	b := fake.NewFullState()
	p, err := New(b, Options{NodeName: node, Families: []localnode.Family{localnode.IPv4, localnode.IPv6}})
	if err != nil {
		t.Fatal(err)
	}
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	ctx := context.Background()
	boom := errors.New("boom")
	steps := []struct {
		name        string
		do          func()
		wantChanged bool
		wantErr     bool
	}{
		{name: "first sync: both (empty) families", do: func() {}, wantChanged: true},
		{name: "nothing new", do: func() {}},
		{name: "a service", do: func() { p.OnServiceAdd(st.Service("ns", "web", v4)) }, wantChanged: true},
		{name: "a resourceVersion-only update", do: func() {
			p.OnServiceUpdate(nil, st.Service("ns", "web", v4, func(s *v1.Service) { s.ResourceVersion = "2" }))
		}},
		{name: "a failing backend", do: func() {
			b.SetError(boom)
			p.OnEndpointSliceAdd(webSlice(st.Endpoint("10.1.0.1", node)))
		}, wantErr: true},
		{name: "the retry succeeds and hands over the new State", do: func() { b.SetError(nil) }, wantChanged: true},
		{name: "settled", do: func() {}},
	}
	for _, s := range steps {
		s.do()
		changed, err := p.SyncReport(ctx)
		if changed != s.wantChanged || (err != nil) != s.wantErr {
			t.Errorf("%s: SyncReport = %v, %v; want changed %v, error %v", s.name, changed, err, s.wantChanged, s.wantErr)
		}
		if s.wantErr && !errors.Is(err, boom) {
			t.Errorf("%s: error %v does not wrap the backend's", s.name, err)
		}
	}
}
