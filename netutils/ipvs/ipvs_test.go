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

package ipvs

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func TestVirtualServer(t *testing.T) {
	base := VirtualServer{Address: net.ParseIP("198.18.10.1"), Protocol: "TCP", Port: 80, Scheduler: "rr", Flags: FlagPersistent, Timeout: 10800}
	tests := []struct {
		name   string
		mutate func(vs *VirtualServer)
		equal  bool
	}{
		{name: "same", mutate: func(*VirtualServer) {}, equal: true},
		{name: "4-byte address form", mutate: func(vs *VirtualServer) { vs.Address = vs.Address.To4() }, equal: true},
		{name: "address", mutate: func(vs *VirtualServer) { vs.Address = net.ParseIP("198.18.10.2") }},
		{name: "protocol", mutate: func(vs *VirtualServer) { vs.Protocol = "UDP" }},
		{name: "port", mutate: func(vs *VirtualServer) { vs.Port = 81 }},
		{name: "scheduler", mutate: func(vs *VirtualServer) { vs.Scheduler = "sh" }},
		{name: "flags", mutate: func(vs *VirtualServer) { vs.Flags |= FlagSourceHash }},
		{name: "timeout", mutate: func(vs *VirtualServer) { vs.Timeout = 1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			other := base
			tc.mutate(&other)
			if got := base.Equal(&other); got != tc.equal {
				t.Errorf("Equal = %v, want %v", got, tc.equal)
			}
		})
	}
	if got := base.String(); got != "198.18.10.1:80/TCP" {
		t.Errorf("String() = %q", got)
	}
	v6 := VirtualServer{Address: net.ParseIP("fd00::1"), Protocol: "UDP", Port: 53}
	if got := v6.String(); got != "[fd00::1]:53/UDP" {
		t.Errorf("String() = %q", got)
	}
}

func TestRealServer(t *testing.T) {
	a := RealServer{Address: net.ParseIP("198.18.1.5"), Port: 8080, Weight: 1, ActiveConn: 3}
	tests := []struct {
		name  string
		other RealServer
		equal bool
	}{
		{name: "same identity, other state", other: RealServer{Address: net.ParseIP("198.18.1.5").To4(), Port: 8080, Weight: 0, InactiveConn: 9}, equal: true},
		{name: "other port", other: RealServer{Address: net.ParseIP("198.18.1.5"), Port: 8081}},
		{name: "other address", other: RealServer{Address: net.ParseIP("198.18.1.6"), Port: 8080}},
	}
	for _, tc := range tests {
		if got := a.Equal(&tc.other); got != tc.equal {
			t.Errorf("%s: Equal = %v, want %v", tc.name, got, tc.equal)
		}
	}
	if got := (&RealServer{Address: net.ParseIP("fd00::5"), Port: 1}).String(); got != "[fd00::5]:1" {
		t.Errorf("String() = %q", got)
	}
}

func TestIsRsGracefulTerminationNeeded(t *testing.T) {
	for proto, want := range map[string]bool{"TCP": true, "tcp": true, "UDP": false, "udp": false, "SCTP": false, "sctp": false, "": true} {
		if got := IsRsGracefulTerminationNeeded(proto); got != want {
			t.Errorf("IsRsGracefulTerminationNeeded(%q) = %v, want %v", proto, got, want)
		}
	}
}

func TestChecks(t *testing.T) {
	vs4 := &VirtualServer{Address: net.ParseIP("198.18.10.1"), Protocol: "tcp", Port: 80}
	vs6 := &VirtualServer{Address: net.ParseIP("fd00::1"), Protocol: "SCTP", Port: 80}
	tests := []struct {
		name    string
		err     error
		wantErr string
	}{
		{name: "valid v4", err: checkVirtualServer(vs4)},
		{name: "valid v6", err: checkVirtualServer(vs6)},
		{name: "nil vs", err: checkVirtualServer(nil), wantErr: "nil IPVS virtual server"},
		{name: "nil address", err: checkVirtualServer(&VirtualServer{Protocol: "TCP"}), wantErr: "invalid address"},
		{name: "bad protocol", err: checkVirtualServer(&VirtualServer{Address: net.ParseIP("198.18.10.1"), Protocol: "ICMP"}), wantErr: `unsupported protocol "ICMP"`},
		{name: "valid rs", err: checkRealServer(vs4, &RealServer{Address: net.ParseIP("198.18.1.1"), Port: 1, Weight: 1})},
		{name: "nil rs", err: checkRealServer(vs4, nil), wantErr: "nil real server"},
		{name: "rs bad address", err: checkRealServer(vs4, &RealServer{Address: net.IP{1, 2}}), wantErr: "invalid address"},
		{name: "rs family mismatch", err: checkRealServer(vs6, &RealServer{Address: net.ParseIP("198.18.1.1")}), wantErr: "address family differs"},
		{name: "rs negative weight", err: checkRealServer(vs4, &RealServer{Address: net.ParseIP("198.18.1.1"), Weight: -1}), wantErr: "negative weight"},
		{name: "timeouts ok", err: checkTimeouts(0, time.Second, time.Minute)},
		{name: "negative timeout", err: checkTimeouts(time.Second, -time.Second), wantErr: "negative IPVS timeout"},
	}
	for _, tc := range tests {
		if tc.wantErr == "" && tc.err != nil {
			t.Errorf("%s: unexpected error %v", tc.name, tc.err)
		}
		if tc.wantErr != "" && (tc.err == nil || !strings.Contains(tc.err.Error(), tc.wantErr)) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, tc.err, tc.wantErr)
		}
	}
}

func TestProtocolConversion(t *testing.T) {
	for _, p := range []string{"TCP", "UDP", "SCTP"} {
		n := stringToProtocol(strings.ToLower(p))
		if n == 0 || protocolToString(Protocol(n)) != p {
			t.Errorf("%s -> %d -> %q", p, n, protocolToString(Protocol(n)))
		}
	}
	if stringToProtocol("icmp") != 0 || protocolToString(1) != "" {
		t.Error("unknown protocols must map to zero values")
	}
}

// TestUnavailable checks that every method of the Interface returned on a kernel without IPVS
// fails with an error wrapping the reason and ErrNotAvailable, and none panics.
func TestUnavailable(t *testing.T) {
	reason := errors.New("no IPVS family")
	var u Interface = unavailable{err: errors.Join(ErrNotAvailable, reason)}
	vs := &VirtualServer{Address: net.ParseIP("198.18.10.1"), Protocol: "TCP", Port: 80}
	rs := &RealServer{Address: net.ParseIP("198.18.1.1"), Port: 80}
	calls := map[string]func() error{
		"Flush":               u.Flush,
		"AddVirtualServer":    func() error { return u.AddVirtualServer(vs) },
		"UpdateVirtualServer": func() error { return u.UpdateVirtualServer(vs) },
		"DeleteVirtualServer": func() error { return u.DeleteVirtualServer(vs) },
		"GetVirtualServer": func() error {
			got, err := u.GetVirtualServer(vs)
			if got != nil {
				return errors.New("non-nil result")
			}
			return err
		},
		"GetVirtualServers": func() error {
			got, err := u.GetVirtualServers()
			if got != nil {
				return errors.New("non-nil result")
			}
			return err
		},
		"AddRealServer": func() error { return u.AddRealServer(vs, rs) },
		"GetRealServers": func() error {
			got, err := u.GetRealServers(vs)
			if got != nil {
				return errors.New("non-nil result")
			}
			return err
		},
		"DeleteRealServer":  func() error { return u.DeleteRealServer(vs, rs) },
		"UpdateRealServer":  func() error { return u.UpdateRealServer(vs, rs) },
		"ConfigureTimeouts": func() error { return u.ConfigureTimeouts(time.Second, time.Second, time.Second) },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, ErrNotAvailable) || !errors.Is(err, reason) {
			t.Errorf("%s: error %v does not wrap ErrNotAvailable and the reason", name, err)
		}
	}
}
