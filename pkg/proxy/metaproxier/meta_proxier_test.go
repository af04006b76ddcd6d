package metaproxier

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/kube-proxy/pkg/proxy"
	proxytest "k8s.io/kube-proxy/pkg/proxy/metaproxier/testing"
)

func svc(name string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

func slice(name string, at discovery.AddressType) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, AddressType: at}
}

func TestDispatch(t *testing.T) {
	tests := []struct {
		name     string
		call     func(p proxy.Provider)
		wantIPv4 []string
		wantIPv6 []string
	}{
		{
			name:     "service add goes to both",
			call:     func(p proxy.Provider) { p.OnServiceAdd(svc("a")) },
			wantIPv4: []string{"OnServiceAdd(ns/a)"},
			wantIPv6: []string{"OnServiceAdd(ns/a)"},
		},
		{
			name:     "service update goes to both",
			call:     func(p proxy.Provider) { p.OnServiceUpdate(svc("a"), svc("b")) },
			wantIPv4: []string{"OnServiceUpdate(ns/a, ns/b)"},
			wantIPv6: []string{"OnServiceUpdate(ns/a, ns/b)"},
		},
		{
			name:     "service delete goes to both",
			call:     func(p proxy.Provider) { p.OnServiceDelete(svc("a")) },
			wantIPv4: []string{"OnServiceDelete(ns/a)"},
			wantIPv6: []string{"OnServiceDelete(ns/a)"},
		},
		{
			name:     "services synced goes to both",
			call:     func(p proxy.Provider) { p.OnServiceSynced() },
			wantIPv4: []string{"OnServiceSynced()"},
			wantIPv6: []string{"OnServiceSynced()"},
		},
		{
			name:     "IPv4 slice add goes to IPv4 only",
			call:     func(p proxy.Provider) { p.OnEndpointSliceAdd(slice("s4", discovery.AddressTypeIPv4)) },
			wantIPv4: []string{"OnEndpointSliceAdd(ns/s4)"},
		},
		{
			name:     "IPv6 slice add goes to IPv6 only",
			call:     func(p proxy.Provider) { p.OnEndpointSliceAdd(slice("s6", discovery.AddressTypeIPv6)) },
			wantIPv6: []string{"OnEndpointSliceAdd(ns/s6)"},
		},
		{
			name: "IPv4 slice update goes to IPv4 only",
			call: func(p proxy.Provider) {
				p.OnEndpointSliceUpdate(slice("s4", discovery.AddressTypeIPv4), slice("s4", discovery.AddressTypeIPv4))
			},
			wantIPv4: []string{"OnEndpointSliceUpdate(ns/s4, ns/s4)"},
		},
		{
			name: "IPv6 slice update goes to IPv6 only",
			call: func(p proxy.Provider) {
				p.OnEndpointSliceUpdate(slice("s6", discovery.AddressTypeIPv6), slice("s6", discovery.AddressTypeIPv6))
			},
			wantIPv6: []string{"OnEndpointSliceUpdate(ns/s6, ns/s6)"},
		},
		{
			name:     "IPv4 slice delete goes to IPv4 only",
			call:     func(p proxy.Provider) { p.OnEndpointSliceDelete(slice("s4", discovery.AddressTypeIPv4)) },
			wantIPv4: []string{"OnEndpointSliceDelete(ns/s4)"},
		},
		{
			name:     "IPv6 slice delete goes to IPv6 only",
			call:     func(p proxy.Provider) { p.OnEndpointSliceDelete(slice("s6", discovery.AddressTypeIPv6)) },
			wantIPv6: []string{"OnEndpointSliceDelete(ns/s6)"},
		},
		{
			name: "FQDN slice goes nowhere",
			call: func(p proxy.Provider) {
				p.OnEndpointSliceAdd(slice("f", discovery.AddressTypeFQDN))
				p.OnEndpointSliceUpdate(slice("f", discovery.AddressTypeFQDN), slice("f", discovery.AddressTypeFQDN))
				p.OnEndpointSliceDelete(slice("f", discovery.AddressTypeFQDN))
			},
		},
		{
			name: "nil slice goes nowhere and does not panic",
			call: func(p proxy.Provider) {
				p.OnEndpointSliceAdd(nil)
				p.OnEndpointSliceUpdate(nil, nil)
				p.OnEndpointSliceDelete(nil)
			},
		},
		{
			name:     "slices synced goes to both",
			call:     func(p proxy.Provider) { p.OnEndpointSlicesSynced() },
			wantIPv4: []string{"OnEndpointSlicesSynced()"},
			wantIPv6: []string{"OnEndpointSlicesSynced()"},
		},
		{
			name:     "topology goes to both",
			call:     func(p proxy.Provider) { p.OnTopologyChange(map[string]string{"topology.kubernetes.io/zone": "z1"}) },
			wantIPv4: []string{"OnTopologyChange(topology.kubernetes.io/zone=z1)"},
			wantIPv6: []string{"OnTopologyChange(topology.kubernetes.io/zone=z1)"},
		},
		{
			name:     "service CIDRs go to both unfiltered",
			call:     func(p proxy.Provider) { p.OnServiceCIDRsChanged([]string{"10.0.0.0/16", "fd00:10::/108"}) },
			wantIPv4: []string{"OnServiceCIDRsChanged(10.0.0.0/16, fd00:10::/108)"},
			wantIPv6: []string{"OnServiceCIDRsChanged(10.0.0.0/16, fd00:10::/108)"},
		},
		{
			name:     "sync goes to both",
			call:     func(p proxy.Provider) { p.Sync() },
			wantIPv4: []string{"Sync()"},
			wantIPv6: []string{"Sync()"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v4, v6 := proxytest.NewRecordingProvider(), proxytest.NewRecordingProvider()
			tc.call(NewMetaProxier(v4, v6))
			if diff := cmp.Diff(tc.wantIPv4, v4.Calls()); diff != "" {
				t.Errorf("IPv4 proxier calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantIPv6, v6.Calls()); diff != "" {
				t.Errorf("IPv6 proxier calls (-want +got):\n%s", diff)
			}
		})
	}
}

// SyncLoop must run both loops although each blocks forever, and must itself
// block (callers run it as their main loop).
func TestSyncLoopRunsBothAndBlocks(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	v4 := &proxytest.RecordingProvider{SyncLoopStarted: make(chan struct{}), SyncLoopBlock: block}
	v6 := &proxytest.RecordingProvider{SyncLoopStarted: make(chan struct{}), SyncLoopBlock: block}
	returned := make(chan struct{})
	go func() {
		NewMetaProxier(v4, v6).SyncLoop()
		close(returned)
	}()
	for name, p := range map[string]*proxytest.RecordingProvider{"IPv4": v4, "IPv6": v6} {
		select {
		case <-p.SyncLoopStarted:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s SyncLoop was never started", name)
		}
	}
	select {
	case <-returned:
		t.Fatal("SyncLoop returned while the wrapped loops were still running")
	default:
	}
}
