package syncshell

import (
	"bytes"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	proxyutiltest "k8s.io/kube-proxy/pkg/proxy/util/testing"
)

// Complete keeps what an option set and fills in the rest; a dry run gets a
// service health server that opens no listener.
func TestHostOptionsComplete(t *testing.T) {
	mine := healthcheck.NewFakeServiceHealthServer()
	nw := proxyutiltest.NewFakeNetwork()
	fake := fmt.Sprintf("%T", healthcheck.NewFakeServiceHealthServer())
	for _, tc := range []struct {
		name       string
		in         HostOptions
		wantServer string // the type of ServiceHealthServer, "" for "not the fake"
		wantNW     proxyutil.NetworkInterfacer
	}{
		{name: "defaults", wantNW: proxyutil.RealNetwork{}},
		{name: "dry run", in: HostOptions{DryRun: &bytes.Buffer{}}, wantServer: fake, wantNW: proxyutil.RealNetwork{}},
		{name: "given", in: HostOptions{ServiceHealthServer: mine, NetworkInterfacer: nw}, wantServer: fake, wantNW: nw},
		{name: "given in a dry run", in: HostOptions{DryRun: &bytes.Buffer{}, ServiceHealthServer: mine, NetworkInterfacer: nw}, wantServer: fake, wantNW: nw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.in
			o.Complete(v1.IPv4Protocol, node, nil, proxyutil.NewNodePortAddresses(v1.IPv4Protocol, nil), nil)
			if o.ServiceHealthServer == nil {
				t.Fatal("no service health server")
			}
			got := fmt.Sprintf("%T", o.ServiceHealthServer)
			if tc.in.ServiceHealthServer != nil && o.ServiceHealthServer != tc.in.ServiceHealthServer {
				t.Errorf("the given service health server was replaced by a %s", got)
			}
			if tc.wantServer != "" && got != tc.wantServer {
				t.Errorf("service health server is a %s, want a %s", got, tc.wantServer)
			}
			if tc.wantServer == "" && got == fake {
				t.Errorf("service health server is the fake outside a dry run")
			}
			if o.NetworkInterfacer != tc.wantNW {
				t.Errorf("network interfacer = %#v, want %#v", o.NetworkInterfacer, tc.wantNW)
			}
		})
	}
}
