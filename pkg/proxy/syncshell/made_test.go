package syncshell

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// ownPort and ownEndpoint stand for a backend's own types; otherPort and
// otherEndpoint for types its makers never return.
type ownPort struct{ *proxy.BaseServicePortInfo }
type otherPort struct{ *proxy.BaseServicePortInfo }
type ownEndpoint struct{ *proxy.BaseEndpointInfo }
type otherEndpoint struct{ *proxy.BaseEndpointInfo }

func TestMadeTypes(t *testing.T) {
	makePort := func(_ *v1.ServicePort, _ *v1.Service, b *proxy.BaseServicePortInfo) proxy.ServicePort {
		return &ownPort{b}
	}
	makeEndpoint := func(b *proxy.BaseEndpointInfo, _ *proxy.ServicePortName) proxy.Endpoint { return &ownEndpoint{b} }
	tests := []struct {
		name string
		// withMakers gives the Shell makers; called runs them once.
		withMakers, called bool
		port               proxy.ServicePort
		endpoint           proxy.Endpoint
		wantPort, wantEp   string // "" when accepted, else the problem
	}{
		{name: "no makers, base types", port: &proxy.BaseServicePortInfo{}, endpoint: &proxy.BaseEndpointInfo{}},
		{name: "no makers, foreign types", port: &otherPort{}, endpoint: &otherEndpoint{},
			wantPort: "unexpected type *syncshell.otherPort", wantEp: "unexpected type *syncshell.otherEndpoint"},
		{name: "makers, their types", withMakers: true, called: true, port: &ownPort{}, endpoint: &ownEndpoint{}},
		{name: "makers, base types they never return", withMakers: true, called: true,
			port: &proxy.BaseServicePortInfo{}, endpoint: &proxy.BaseEndpointInfo{},
			wantPort: "unexpected type *proxy.BaseServicePortInfo", wantEp: "unexpected type *proxy.BaseEndpointInfo"},
		{name: "makers, another type", withMakers: true, called: true, port: &otherPort{}, endpoint: &otherEndpoint{},
			wantPort: "unexpected type *syncshell.otherPort", wantEp: "unexpected type *syncshell.otherEndpoint"},
		// Nothing made yet: the trackers hold nothing, so nothing can be
		// of the makers' type.
		{name: "makers never called", withMakers: true, port: &ownPort{}, endpoint: &ownEndpoint{},
			wantPort: "unexpected type *syncshell.ownPort", wantEp: "unexpected type *syncshell.ownEndpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m madeTypes
			mp, me := m.wrap(nil, nil)
			if tc.withMakers {
				mp, me = m.wrap(makePort, makeEndpoint)
			}
			if (mp == nil) == tc.withMakers || (me == nil) == tc.withMakers {
				t.Fatalf("wrap returned makers %v, %v; want them only when given", mp != nil, me != nil)
			}
			if tc.called {
				if _, ok := mp(&v1.ServicePort{}, &v1.Service{}, &proxy.BaseServicePortInfo{}).(*ownPort); !ok {
					t.Fatal("wrapped port maker did not return the maker's value")
				}
				if _, ok := me(&proxy.BaseEndpointInfo{}, &proxy.ServicePortName{}).(*ownEndpoint); !ok {
					t.Fatal("wrapped endpoint maker did not return the maker's value")
				}
			}
			if got := m.portProblem(tc.port); got != tc.wantPort {
				t.Errorf("portProblem(%T) = %q, want %q", tc.port, got, tc.wantPort)
			}
			if got := m.endpointProblem(tc.endpoint); got != tc.wantEp {
				t.Errorf("endpointProblem(%T) = %q, want %q", tc.endpoint, got, tc.wantEp)
			}
		})
	}
}

// portOnlyValidator implements only the service-port half of Validator and
// refuses the port named refuse.
type portOnlyValidator struct {
	rec    *recorder // not embedded: its ValidEndpoint must not be promoted
	refuse string
}

func (v *portOnlyValidator) Sync(ctx context.Context, u *Update) (Outcome, error) {
	return v.rec.Sync(ctx, u)
}

func (v *portOnlyValidator) ValidServicePort(name proxy.ServicePortName, _ proxy.ServicePort) bool {
	return name.String() != v.refuse
}

// TestShellValidation runs the default through a Shell: the ports its maker
// made reach the backend with a policy, a backend validating ports only is
// asked about ports (and not taken for an endpoint validator), and the
// policies of the ports it keeps see every endpoint.
func TestShellValidation(t *testing.T) {
	for _, tc := range []struct {
		name       string
		refuse     string
		wantPorts  []string
		maker      bool
		noValidate bool
	}{
		{name: "maker, no validator", maker: true, noValidate: true, wantPorts: []string{"ns/a:p", "ns/b:p"}},
		{name: "maker, port validator refusing one", maker: true, refuse: "ns/b:p", wantPorts: []string{"ns/a:p"}},
		{name: "base types, port validator refusing one", refuse: "ns/a:p", wantPorts: []string{"ns/b:p"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			var b Backend = &portOnlyValidator{rec: rec, refuse: tc.refuse}
			if tc.noValidate {
				b = rec
			}
			s := newShell(t, b, func(o *Options) {
				if tc.maker {
					o.MakeServicePort = func(_ *v1.ServicePort, _ *v1.Service, base *proxy.BaseServicePortInfo) proxy.ServicePort {
						return &ownPort{base}
					}
				}
			})
			if _, isRecorder := b.(*recorder); !isRecorder && s.endpointValidator != nil {
				t.Fatal("a port-only validator was taken for an endpoint validator")
			}
			s.OnServiceAdd(service("a", "10.0.0.1", nil))
			s.OnEndpointSliceAdd(slice("a", endpoint{"10.1.0.1", node, true}))
			s.OnServiceAdd(service("b", "10.0.0.2", nil))
			s.OnEndpointSliceAdd(slice("b", endpoint{"10.1.0.2", "node-b", true}))
			initialize(s)
			syncNow(t, s)
			got := rec.last(t).policies
			if len(got) != len(tc.wantPorts) {
				t.Fatalf("policies for %v, want exactly %v", got, tc.wantPorts)
			}
			for _, name := range tc.wantPorts {
				if got[name] == nil || got[name].Internal != proxy.Forward {
					t.Errorf("%s: policy %+v, want one forwarding to its endpoint", name, got[name])
				}
			}
		})
	}
}

func periods(minSync, sync time.Duration) *kubeproxyconfig.KubeProxyConfiguration {
	return &kubeproxyconfig.KubeProxyConfiguration{MinSyncPeriod: metav1.Duration{Duration: minSync}, SyncPeriod: metav1.Duration{Duration: sync}}
}

func TestNewProxierShell(t *testing.T) {
	tests := []struct {
		name      string
		ps        ProxierShell
		wantErr   string
		wantRetry time.Duration
		wantCheck time.Duration
	}{
		{name: "checked", ps: ProxierShell{Mode: "nftables", Family: v1.IPv4Protocol, Config: periods(0, 20*time.Second), CheckRules: true},
			wantRetry: 20 * time.Second, wantCheck: 20 * time.Second},
		{name: "dry run: no check", ps: ProxierShell{Mode: "iptables", Family: v1.IPv6Protocol, Config: periods(0, 20*time.Second)},
			wantRetry: 20 * time.Second},
		{name: "default sync period", ps: ProxierShell{Mode: "ipvs", Family: v1.IPv4Protocol, Config: periods(0, 0), CheckRules: true},
			wantRetry: 30 * time.Second, wantCheck: 30 * time.Second},
		{name: "bad family names the mode", ps: ProxierShell{Mode: "ipvs", Family: "IPv5", Config: periods(0, 0)},
			wantErr: `ipvs proxier: invalid IP family "IPv5"`},
		{name: "min above max", ps: ProxierShell{Mode: "iptables", Family: v1.IPv4Protocol, Config: periods(2*time.Hour, 0)},
			wantErr: "iptables proxier (IPv4): syncshell: sync intervals"},
		{name: "no configuration", ps: ProxierShell{Mode: "nftables", Family: v1.IPv4Protocol},
			wantErr: "nftables proxier (IPv4): nil configuration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var synced int
			tc.ps.Logger = klog.Background()
			tc.ps.OnSync = func(SyncResult) { synced++ }
			s, err := NewProxierShell(context.Background(), tc.ps, &recorder{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.RetryInterval(); got != tc.wantRetry {
				t.Errorf("RetryInterval() = %v, want %v", got, tc.wantRetry)
			}
			if got := s.opts.CheckInterval; got != tc.wantCheck {
				t.Errorf("CheckInterval = %v, want %v", got, tc.wantCheck)
			}
			if s.opts.Family != tc.ps.Family || s.opts.MaxInterval != FullSyncPeriod || !s.opts.SyncWhenInitialized {
				t.Errorf("not ProxierOptions' timing: %+v", s.opts)
			}
			if s.opts.OnSync == nil || s.opts.Logger == nil {
				t.Error("OnSync or Logger not passed on")
			}
		})
	}
}
