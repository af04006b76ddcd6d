//go:build linux

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

	libipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"
)

func TestAvailable(t *testing.T) {
	modErr := errors.New("modprobe ip_vs: exit status 1 (module not found)")
	tests := []struct {
		name      string
		lookups   []error // results of successive family lookups
		modprobe  error
		wantErr   string
		wantLoads int
	}{
		{name: "family present", lookups: []error{nil}},
		{name: "module loaded on demand", lookups: []error{unix.ENOENT, nil}, wantLoads: 1},
		{name: "no module", lookups: []error{unix.ENOENT, unix.ENOENT}, modprobe: modErr, wantErr: "module not found", wantLoads: 1},
		{name: "modprobe succeeds but family still missing", lookups: []error{unix.ENOENT, unix.ENOENT}, wantErr: "IPVS is not available", wantLoads: 1},
		{name: "netlink failure is reported, no modprobe", lookups: []error{unix.EPERM}, wantErr: "operation not permitted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			origLookup, origLoad := lookupFamily, loadModule
			t.Cleanup(func() { lookupFamily, loadModule = origLookup, origLoad })
			lookups, loads, calls := tc.lookups, 0, 0
			// Past the scripted results the last one repeats: the kernel does not change.
			lookupFamily = func() error {
				calls++
				err := lookups[0]
				if len(lookups) > 1 {
					lookups = lookups[1:]
				}
				return err
			}
			loadModule = func() error { loads++; return tc.modprobe }

			err := Available()
			if calls != len(tc.lookups) {
				t.Errorf("looked the family up %d times, want %d", calls, len(tc.lookups))
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Available() = %v, want nil", err)
				}
			} else {
				if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Available() = %v, want ErrNotAvailable containing %q", err, tc.wantErr)
				}
				if loads != tc.wantLoads {
					t.Errorf("modprobe ran %d times, want %d", loads, tc.wantLoads)
				}
				if _, err := NewChecked(); !errors.Is(err, ErrNotAvailable) {
					t.Errorf("NewChecked() error = %v, want ErrNotAvailable", err)
				}
			}
			if loads != tc.wantLoads && tc.wantErr == "" {
				t.Errorf("modprobe ran %d times, want %d", loads, tc.wantLoads)
			}
		})
	}
}

func TestServiceConversion(t *testing.T) {
	tests := []struct {
		name       string
		vs         VirtualServer
		wantFamily uint16
		wantMask   uint32
		wantProto  uint16
	}{
		{name: "v4 tcp", vs: VirtualServer{Address: net.ParseIP("198.18.10.1"), Protocol: "TCP", Port: 80, Scheduler: "rr", Flags: FlagPersistent, Timeout: 30},
			wantFamily: unix.AF_INET, wantMask: 0xffffffff, wantProto: unix.IPPROTO_TCP},
		{name: "v6 udp lower case", vs: VirtualServer{Address: net.ParseIP("fd00::1"), Protocol: "udp", Port: 53, Scheduler: "sh", Flags: FlagSourceHash},
			wantFamily: unix.AF_INET6, wantMask: 128, wantProto: unix.IPPROTO_UDP},
		{name: "sctp", vs: VirtualServer{Address: net.ParseIP("198.18.10.1"), Protocol: "SCTP", Port: 9},
			wantFamily: unix.AF_INET, wantMask: 0xffffffff, wantProto: unix.IPPROTO_SCTP},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := toIPVSService(&tc.vs)
			if err != nil {
				t.Fatal(err)
			}
			if svc.AddressFamily != tc.wantFamily || svc.Netmask != tc.wantMask || svc.Protocol != tc.wantProto {
				t.Errorf("service = %+v", svc)
			}
			// The kernel reports the service back with the hashed flag set.
			svc.Flags |= FlagHashed
			back, err := toVirtualServer(svc)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.vs
			want.Protocol = strings.ToUpper(want.Protocol)
			if !back.Equal(&want) {
				t.Errorf("round trip = %+v, want %+v", back, want)
			}
		})
	}
	if _, err := toVirtualServer(&libipvs.Service{Address: net.ParseIP("198.18.10.1"), Protocol: unix.IPPROTO_TCP}); err == nil {
		t.Error("a kernel service without the hashed flag was accepted")
	}
	if _, err := toVirtualServer(nil); err == nil {
		t.Error("nil service accepted")
	}
	fwmark, err := toVirtualServer(&libipvs.Service{AddressFamily: unix.AF_INET6, Flags: FlagHashed})
	if err != nil || !fwmark.Address.Equal(net.IPv6zero) {
		t.Errorf("address-less v6 service = %+v, %v; want [::]", fwmark, err)
	}
	if _, _, err := toIPVSPair(&VirtualServer{Address: net.ParseIP("198.18.10.1"), Protocol: "TCP"}, &RealServer{Address: net.ParseIP("fd00::1")}); err == nil {
		t.Error("mixed-family pair accepted")
	}
	rs, err := toRealServer(&libipvs.Destination{Address: net.ParseIP("198.18.1.1"), Port: 80, Weight: 2, ActiveConnections: 3, InactiveConnections: 4})
	if err != nil || rs.Weight != 2 || rs.ActiveConn != 3 || rs.InactiveConn != 4 || rs.Port != 80 {
		t.Errorf("toRealServer = %+v, %v", rs, err)
	}
}
