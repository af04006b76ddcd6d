//go:build linux

package proxieropts

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	proxyutiltest "k8s.io/kube-proxy/pkg/proxy/util/testing"
)

// mine and theirs stand for two proxiers' own options.
type mine struct {
	a, b int
}
type theirs struct{ x bool }

func TestCollect(t *testing.T) {
	var buf bytes.Buffer
	ct := conntrack.NewFake()
	shs := healthcheck.NewFakeServiceHealthServer()
	nw := proxyutiltest.NewFakeNetwork()
	hooked := 0
	hook := func(syncshell.SyncResult) { hooked++ }
	tests := []struct {
		name     string
		opts     []Option
		check    func(t *testing.T, o Options)
		wantMine mine
		wantErr  string
	}{
		{name: "none", check: func(t *testing.T, o Options) {
			if o.DryRun != nil || o.Conntrack != nil || o.ServiceHealthServer != nil || o.NetworkInterfacer != nil || o.SyncHook != nil {
				t.Errorf("zero options expected, got %+v", o)
			}
		}},
		{name: "every shared option", opts: []Option{WithDryRun(&buf), WithConntrack(ct), WithServiceHealthServer(shs),
			WithNetworkInterfacer(nw), WithSyncHook(hook)},
			check: func(t *testing.T, o Options) {
				if o.DryRun != &buf || o.Conntrack != ct || o.ServiceHealthServer != shs || o.NetworkInterfacer != nw || o.SyncHook == nil {
					t.Errorf("options not all set: %+v", o)
				}
				o.SyncHook(syncshell.SyncResult{})
				if hooked != 1 {
					t.Errorf("SyncHook is not the hook given")
				}
			}},
		{name: "own options accumulate, later wins, nil skipped",
			opts:     []Option{Set(func(m *mine) { m.a = 1 }), nil, Set(func(m *mine) { m.b = 2 }), Set(func(m *mine) { m.a = 3 })},
			wantMine: mine{a: 3, b: 2}},
		{name: "another proxier's option", opts: []Option{Set(func(m *mine) { m.a = 1 }), Set(func(x *theirs) { x.x = true })},
			wantMine: mine{a: 1}, wantErr: "option for another proxier: it sets *proxieropts.theirs, this proxier reads *proxieropts.mine"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Collect[mine](tc.opts)
			o, m := c.Options, c.Own
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if m != tc.wantMine {
				t.Errorf("own options = %+v, want %+v", m, tc.wantMine)
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}
