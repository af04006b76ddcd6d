/*
Copyright The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package testing

import (
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/net-utils/ipvs"
)

func vsOf(ip string, proto string, port uint16) *ipvs.VirtualServer {
	return &ipvs.VirtualServer{Address: net.ParseIP(ip), Protocol: proto, Port: port, Scheduler: "rr"}
}

func rsOf(ip string, port uint16, weight int) *ipvs.RealServer {
	return &ipvs.RealServer{Address: net.ParseIP(ip), Port: port, Weight: weight}
}

func TestFakeIPVS(t *testing.T) {
	vs := vsOf("198.18.10.1", "TCP", 80)
	type step struct {
		do      func(f *FakeIPVS) error
		wantErr string
	}
	tests := []struct {
		name  string
		steps []step
		check func(t *testing.T, f *FakeIPVS)
	}{
		{
			name: "add, get returns a copy",
			steps: []step{
				{do: func(f *FakeIPVS) error { return f.AddVirtualServer(vs) }},
				{do: func(f *FakeIPVS) error {
					got, err := f.GetVirtualServer(vsOf("198.18.10.1", "TCP", 80))
					if err == nil {
						got.Scheduler = "changed"
					}
					return err
				}},
			},
			check: func(t *testing.T, f *FakeIPVS) {
				key := ServiceKey{IP: "198.18.10.1", Port: 80, Protocol: "TCP"}
				if f.Services[key] == nil || f.Services[key].Scheduler != "rr" {
					t.Errorf("stored service = %+v; a returned copy changed it or it is missing", f.Services[key])
				}
				if d := f.Destinations[key]; d == nil || len(d) != 0 {
					t.Errorf("destinations not initialised: %v", d)
				}
			},
		},
		{
			name: "duplicate add fails like the kernel",
			steps: []step{
				{do: func(f *FakeIPVS) error { return f.AddVirtualServer(vs) }},
				{do: func(f *FakeIPVS) error { return f.AddVirtualServer(vsOf("198.18.10.1", "tcp", 80)) }, wantErr: "file exists"},
			},
		},
		{
			name: "protocols are distinct services",
			steps: []step{
				{do: func(f *FakeIPVS) error { return f.AddVirtualServer(vs) }},
				{do: func(f *FakeIPVS) error { return f.AddVirtualServer(vsOf("198.18.10.1", "UDP", 80)) }},
			},
			check: func(t *testing.T, f *FakeIPVS) {
				all, _ := f.GetVirtualServers()
				if len(all) != 2 || all[0].Protocol != "TCP" || all[1].Protocol != "UDP" {
					t.Errorf("GetVirtualServers = %v", all)
				}
			},
		},
		{
			name: "update and delete of missing service fail",
			steps: []step{
				{do: func(f *FakeIPVS) error { return f.UpdateVirtualServer(vs) }, wantErr: "no such process"},
				{do: func(f *FakeIPVS) error { return f.DeleteVirtualServer(vs) }, wantErr: "no such process"},
				{do: func(f *FakeIPVS) error { _, err := f.GetVirtualServer(vs); return err }, wantErr: "not found"},
				{do: func(f *FakeIPVS) error { _, err := f.GetRealServers(vs); return err }, wantErr: "no such process"},
				{do: func(f *FakeIPVS) error { return f.AddRealServer(vs, rsOf("198.18.1.1", 80, 1)) }, wantErr: "no such process"},
			},
		},
		{
			name: "invalid input",
			steps: []step{
				{do: func(f *FakeIPVS) error { return f.AddVirtualServer(nil) }, wantErr: "nil virtual server"},
				{do: func(f *FakeIPVS) error { return f.AddVirtualServer(&ipvs.VirtualServer{Protocol: "TCP"}) }, wantErr: "nil address"},
				{do: func(f *FakeIPVS) error { return f.AddVirtualServer(vsOf("198.18.10.1", "ICMP", 0)) }, wantErr: "unsupported protocol"},
				{do: func(f *FakeIPVS) error { return f.AddVirtualServer(vs) }},
				{do: func(f *FakeIPVS) error { return f.AddRealServer(vs, nil) }, wantErr: "nil real server"},
				{do: func(f *FakeIPVS) error { return f.ConfigureTimeouts(-1, 0, 0) }, wantErr: "negative"},
			},
		},
		{
			name: "real servers sorted, duplicate refused, update keeps counters, delete",
			steps: []step{
				{do: func(f *FakeIPVS) error { return f.AddVirtualServer(vs) }},
				{do: func(f *FakeIPVS) error { return f.AddRealServer(vs, rsOf("198.18.1.9", 80, 1)) }},
				{do: func(f *FakeIPVS) error { return f.AddRealServer(vs, rsOf("198.18.1.1", 80, 1)) }},
				{do: func(f *FakeIPVS) error { return f.AddRealServer(vs, rsOf("198.18.1.1", 80, 5)) }, wantErr: "file exists"},
				{do: func(f *FakeIPVS) error {
					f.Destinations[ServiceKey{IP: "198.18.10.1", Port: 80, Protocol: "TCP"}][0].ActiveConn = 7
					return f.UpdateRealServer(vs, rsOf("198.18.1.1", 80, 0))
				}},
				{do: func(f *FakeIPVS) error { return f.UpdateRealServer(vs, rsOf("198.18.1.2", 80, 0)) }, wantErr: "no such file"},
				{do: func(f *FakeIPVS) error { return f.DeleteRealServer(vs, rsOf("198.18.1.9", 80, 0)) }},
				{do: func(f *FakeIPVS) error { return f.DeleteRealServer(vs, rsOf("198.18.1.9", 80, 0)) }, wantErr: "no such file"},
			},
			check: func(t *testing.T, f *FakeIPVS) {
				rss, err := f.GetRealServers(vs)
				if err != nil || len(rss) != 1 {
					t.Fatalf("GetRealServers = %v, %v", rss, err)
				}
				if rss[0].String() != "198.18.1.1:80" || rss[0].Weight != 0 || rss[0].ActiveConn != 7 {
					t.Errorf("real server = %+v; want weight 0 and the connection counter kept", rss[0])
				}
			},
		},
		{
			name: "delete service drops its real servers; flush leaves the fake usable",
			steps: []step{
				{do: func(f *FakeIPVS) error { return f.AddVirtualServer(vs) }},
				{do: func(f *FakeIPVS) error { return f.AddRealServer(vs, rsOf("198.18.1.1", 80, 1)) }},
				{do: func(f *FakeIPVS) error { return f.DeleteVirtualServer(vs) }},
				{do: func(f *FakeIPVS) error { return f.AddVirtualServer(vs) }},
				{do: func(f *FakeIPVS) error { return f.Flush() }},
				{do: func(f *FakeIPVS) error { return f.AddVirtualServer(vs) }},
			},
			check: func(t *testing.T, f *FakeIPVS) {
				rss, err := f.GetRealServers(vs)
				if err != nil || len(rss) != 0 {
					t.Errorf("re-added service has real servers %v, %v", rss, err)
				}
			},
		},
		{
			name: "timeouts recorded, zero leaves unchanged",
			steps: []step{
				{do: func(f *FakeIPVS) error { return f.ConfigureTimeouts(900*time.Second, 120*time.Second, 300*time.Second) }},
				{do: func(f *FakeIPVS) error { return f.ConfigureTimeouts(0, 0, time.Second) }},
			},
			check: func(t *testing.T, f *FakeIPVS) {
				if f.TCPTimeout != 900*time.Second || f.TCPFinTimeout != 120*time.Second || f.UDPTimeout != time.Second {
					t.Errorf("timeouts = %s %s %s", f.TCPTimeout, f.TCPFinTimeout, f.UDPTimeout)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake()
			for i, s := range tc.steps {
				err := s.do(f)
				if s.wantErr == "" && err != nil {
					t.Fatalf("step %d: unexpected error %v", i, err)
				}
				if s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)) {
					t.Fatalf("step %d: error %v, want one containing %q", i, err, s.wantErr)
				}
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
	var zero FakeIPVS
	if err := zero.AddVirtualServer(vs); err != nil {
		t.Errorf("zero FakeIPVS: %v", err)
	}
	key := ServiceKey{IP: "fd00::1", Port: 53, Protocol: "UDP"}
	if key.String() != "[fd00::1]:53/UDP" {
		t.Errorf("ServiceKey.String() = %q", key.String())
	}
	rk := RealServerKey{Address: net.ParseIP("198.18.1.1"), Port: 80}
	if rk.String() != "198.18.1.1:80" {
		t.Errorf("RealServerKey.String() = %q", rk.String())
	}
}
