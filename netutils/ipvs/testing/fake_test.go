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
	"slices"
	"strconv"
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

// TestFakeIPVSGettersCopy checks that nothing a getter returns, addresses included, is shared
// with the fake or with another returned entry.
func TestFakeIPVSGettersCopy(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, f *FakeIPVS)
	}{
		{"virtual server fields", func(t *testing.T, f *FakeIPVS) {
			all, _ := f.GetVirtualServers()
			for _, vs := range all {
				vs.Scheduler, vs.Port = "changed", 1
			}
		}},
		{"virtual server address bytes", func(t *testing.T, f *FakeIPVS) {
			all, _ := f.GetVirtualServers()
			for _, vs := range all {
				vs.Address[len(vs.Address)-1] = 99
			}
		}},
		{"append to a virtual server's address", func(t *testing.T, f *FakeIPVS) {
			all, _ := f.GetVirtualServers()
			_ = append(all[0].Address, 1, 2, 3, 4)
			if all[1].Address.String() != "198.18.10.2" {
				t.Errorf("appending to one result's address changed the next: %s", all[1].Address)
			}
		}},
		{"real server fields", func(t *testing.T, f *FakeIPVS) {
			rss, _ := f.GetRealServers(vsOf("198.18.10.1", "TCP", 80))
			for _, rs := range rss {
				rs.Weight, rs.ActiveConn = 42, 42
			}
		}},
		{"real server address bytes", func(t *testing.T, f *FakeIPVS) {
			rss, _ := f.GetRealServers(vsOf("198.18.10.1", "TCP", 80))
			for _, rs := range rss {
				rs.Address[len(rs.Address)-1] = 99
			}
		}},
		{"append to a real server's address", func(t *testing.T, f *FakeIPVS) {
			rss, _ := f.GetRealServers(vsOf("198.18.10.1", "TCP", 80))
			_ = append(rss[0].Address, 1, 2, 3, 4)
			if rss[1].String() != "198.18.1.2:8080" {
				t.Errorf("appending to one result's address changed the next: %s", rss[1])
			}
		}},
	}
	dump := func(f *FakeIPVS) string {
		var b strings.Builder
		all, _ := f.GetVirtualServers()
		for _, vs := range all {
			b.WriteString(vs.String() + " " + vs.Scheduler + ":")
			rss, _ := f.GetRealServers(vs)
			for _, rs := range rss {
				b.WriteString(" " + rs.String() + "/" + strconv.Itoa(rs.Weight) + "/" + strconv.Itoa(rs.ActiveConn))
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake()
			for _, ip := range []string{"198.18.10.1", "198.18.10.2", "fd00::1"} {
				vs := vsOf(ip, "TCP", 80)
				if err := f.AddVirtualServer(vs); err != nil {
					t.Fatal(err)
				}
				for _, rs := range []string{"198.18.1.1", "198.18.1.2"} {
					if err := f.AddRealServer(vs, rsOf(rs, 8080, 1)); err != nil {
						t.Fatal(err)
					}
				}
			}
			before := dump(f)
			tc.mutate(t, f)
			if after := dump(f); after != before {
				t.Errorf("editing results changed the fake:\nbefore:\n%safter:\n%s", before, after)
			}
		})
	}
}

// TestFakeIPVSListOrder checks that GetVirtualServers stays sorted by String() however the
// table changed since the last listing, also through the exported map.
func TestFakeIPVSListOrder(t *testing.T) {
	add := func(ip, proto string) func(f *FakeIPVS) {
		return func(f *FakeIPVS) {
			if err := f.AddVirtualServer(vsOf(ip, proto, 80)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name   string
		change func(f *FakeIPVS)
		want   []string
	}{
		{"nothing", func(*FakeIPVS) {}, []string{"198.18.10.1:80/TCP", "198.18.10.9:80/TCP", "198.18.9.1:80/TCP"}},
		{"added", add("198.18.10.10", "TCP"), []string{"198.18.10.10:80/TCP", "198.18.10.1:80/TCP", "198.18.10.9:80/TCP", "198.18.9.1:80/TCP"}},
		{"deleted", func(f *FakeIPVS) { _ = f.DeleteVirtualServer(vsOf("198.18.10.9", "TCP", 80)) },
			[]string{"198.18.10.1:80/TCP", "198.18.9.1:80/TCP"}},
		{"one deleted and one added: same count", func(f *FakeIPVS) {
			_ = f.DeleteVirtualServer(vsOf("198.18.9.1", "TCP", 80))
			add("198.18.0.1", "TCP")(f)
		}, []string{"198.18.0.1:80/TCP", "198.18.10.1:80/TCP", "198.18.10.9:80/TCP"}},
		{"replaced through the map", func(f *FakeIPVS) {
			delete(f.Services, ServiceKey{IP: "198.18.9.1", Port: 80, Protocol: "TCP"})
			f.Services[ServiceKey{IP: "198.18.0.1", Port: 80, Protocol: "TCP"}] = vsOf("198.18.0.1", "TCP", 80)
		}, []string{"198.18.0.1:80/TCP", "198.18.10.1:80/TCP", "198.18.10.9:80/TCP"}},
		{"protocol respelled by an update", func(f *FakeIPVS) {
			add("198.18.10.1", "UDP")(f)
			_ = f.UpdateVirtualServer(vsOf("198.18.10.1", "tcp", 80))
		}, []string{"198.18.10.1:80/UDP", "198.18.10.1:80/tcp", "198.18.10.9:80/TCP", "198.18.9.1:80/TCP"}},
		{"flushed and refilled", func(f *FakeIPVS) {
			_ = f.Flush()
			add("198.18.10.2", "TCP")(f)
			add("198.18.10.1", "TCP")(f)
		}, []string{"198.18.10.1:80/TCP", "198.18.10.2:80/TCP"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake()
			for _, ip := range []string{"198.18.9.1", "198.18.10.9", "198.18.10.1"} {
				add(ip, "TCP")(f)
			}
			// A first listing, so that the change is made to a table already sorted once.
			if _, err := f.GetVirtualServers(); err != nil {
				t.Fatal(err)
			}
			tc.change(f)
			all, err := f.GetVirtualServers()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, vs := range all {
				got = append(got, vs.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("GetVirtualServers = %v, want %v", got, tc.want)
			}
		})
	}
}

// BenchmarkFakeIPVSList lists 10k virtual servers and their real servers, as a full sync of
// the ipvs proxier does.
func BenchmarkFakeIPVSList(b *testing.B) {
	f := NewFake()
	for i := range 10000 {
		vs := vsOf(net.IPv4(172, 30, byte(i/250), byte(i%250+1)).String(), "TCP", 80)
		if err := f.AddVirtualServer(vs); err != nil {
			b.Fatal(err)
		}
		for j := range 10 {
			if err := f.AddRealServer(vs, rsOf(net.IPv4(10, byte(i/250), byte(i%250), byte(j+1)).String(), 8080, 1)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		all, err := f.GetVirtualServers()
		if err != nil {
			b.Fatal(err)
		}
		for _, vs := range all {
			if _, err := f.GetRealServers(vs); err != nil {
				b.Fatal(err)
			}
		}
	}
}
