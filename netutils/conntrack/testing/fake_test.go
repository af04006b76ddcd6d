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

package testing

import (
	"errors"
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"k8s.io/net-utils/conntrack"
)

func flow(proto uint8, src, dst, replySrc string, sport, dport, rport uint16) *netlink.ConntrackFlow {
	return &netlink.ConntrackFlow{
		Forward: netlink.IPTuple{Protocol: proto, SrcIP: net.ParseIP(src), DstIP: net.ParseIP(dst), SrcPort: sport, DstPort: dport},
		Reverse: netlink.IPTuple{Protocol: proto, SrcIP: net.ParseIP(replySrc), DstIP: net.ParseIP(src), SrcPort: rport, DstPort: sport},
	}
}

func TestFake(t *testing.T) {
	v4a := flow(unix.IPPROTO_UDP, "198.18.0.1", "198.18.10.1", "198.18.1.5", 1000, 53, 5353)
	v4b := flow(unix.IPPROTO_TCP, "198.18.0.1", "198.18.10.1", "198.18.1.5", 1001, 53, 5353)
	v6a := flow(unix.IPPROTO_UDP, "fd00::1", "fd00:10::1", "fd00:1::5", 1000, 53, 5353)
	tests := []struct {
		name        string
		family      uint8
		del         []*netlink.ConntrackFlow
		deleteErr   error
		wantN       int
		wantErr     bool
		wantList    int
		wantDeleted []*netlink.ConntrackFlow
		wantLeft    int
	}{
		{name: "list v4 only", family: unix.AF_INET, wantList: 2, wantLeft: 3},
		{name: "list v6 only", family: unix.AF_INET6, wantList: 1, wantLeft: 3},
		{name: "delete one v4", family: unix.AF_INET, del: []*netlink.ConntrackFlow{v4a}, wantN: 1, wantList: 1, wantDeleted: []*netlink.ConntrackFlow{v4a}, wantLeft: 2},
		{name: "family scopes deletion", family: unix.AF_INET, del: []*netlink.ConntrackFlow{v6a}, wantList: 2, wantLeft: 3},
		{name: "injected delete error", family: unix.AF_INET, del: []*netlink.ConntrackFlow{v4a}, deleteErr: unix.ENOBUFS, wantErr: true, wantList: 2, wantLeft: 3},
		{name: "bad family", family: 9, del: []*netlink.ConntrackFlow{v4a}, wantErr: true, wantLeft: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake(v4a, v4b, nil, v6a)
			f.DeleteErr = tc.deleteErr
			n, err := f.DeleteEntries(tc.family, tc.del)
			if (err != nil) != tc.wantErr || n != tc.wantN {
				t.Fatalf("DeleteEntries = %d, %v; want %d, error %v", n, err, tc.wantN, tc.wantErr)
			}
			if tc.family != 9 {
				got, err := f.ListEntries(tc.family)
				if err != nil || len(got) != tc.wantList {
					t.Errorf("ListEntries = %d entries, %v; want %d", len(got), err, tc.wantList)
				}
			}
			if len(f.Entries()) != tc.wantLeft {
				t.Errorf("table has %d entries, want %d", len(f.Entries()), tc.wantLeft)
			}
			del := f.Deleted()
			if len(del) != len(tc.wantDeleted) {
				t.Fatalf("Deleted() = %v, want %v", del, tc.wantDeleted)
			}
			for i := range del {
				if del[i] != tc.wantDeleted[i] {
					t.Errorf("Deleted()[%d] = %v, want %v", i, del[i], tc.wantDeleted[i])
				}
			}
		})
	}
}

// TestFakeWithHelpers checks the fake works with the package-level helpers a caller uses.
func TestFakeWithHelpers(t *testing.T) {
	dnat := flow(unix.IPPROTO_UDP, "198.18.0.1", "198.18.10.1", "198.18.1.5", 1000, 53, 5353)
	direct := flow(unix.IPPROTO_UDP, "198.18.0.1", "198.18.1.5", "198.18.1.5", 1002, 5353, 5353)
	f := NewFake(dnat, direct)
	listErr := errors.New("interrupted")
	n, err := conntrack.DeleteFiltered(f, unix.AF_INET, conntrack.Filter{NAT: conntrack.DNATed})
	if err != nil || n != 1 {
		t.Fatalf("DeleteFiltered = %d, %v; want 1, nil", n, err)
	}
	if f.ListCalls != 1 || f.DeleteCalls != 1 {
		t.Errorf("calls list=%d delete=%d, want 1 and 1", f.ListCalls, f.DeleteCalls)
	}
	f.ListErr = listErr
	if _, err := conntrack.Count(f, unix.AF_INET); !errors.Is(err, listErr) {
		t.Errorf("Count error = %v, want %v", err, listErr)
	}
	f.ListErr = nil
	if c, err := conntrack.Count(f, unix.AF_INET); c != 1 || err != nil {
		t.Errorf("Count = %d, %v; want 1", c, err)
	}
	f.Reset()
	if len(f.Entries()) != 0 || len(f.Deleted()) != 0 || f.ListCalls != 0 {
		t.Errorf("Reset left state behind")
	}
}
