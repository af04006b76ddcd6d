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
	"strings"
	"testing"

	"k8s.io/net-utils/ipset"
)

func TestFakeSpecifics(t *testing.T) {
	tests := []struct {
		name    string
		run     func(f *FakeIPSet) error
		wantErr string
		check   func(t *testing.T, f *FakeIPSet)
	}{
		{
			name: "zero value is usable",
			run: func(_ *FakeIPSet) error {
				var z FakeIPSet
				return z.CreateSet(&ipset.IPSet{Name: "Z"}, false)
			},
		},
		{
			name: "CreateSet fills defaults into the caller's set and stores it",
			run: func(f *FakeIPSet) error {
				return f.CreateSet(&ipset.IPSet{Name: "S"}, false)
			},
			check: func(t *testing.T, f *FakeIPSet) {
				s := f.Sets["S"]
				if s == nil || s.SetType != ipset.HashIPPort || s.HashFamily != ipset.ProtocolFamilyIPV4 || s.HashSize != 1024 {
					t.Errorf("stored set = %+v", s)
				}
				if f.Entries["S"] == nil || f.Entries["S"].Len() != 0 {
					t.Errorf("entries not initialised: %v", f.Entries["S"])
				}
			},
		},
		{
			name:    "CreateSet validates",
			run:     func(f *FakeIPSet) error { return f.CreateSet(&ipset.IPSet{Name: "S", HashFamily: "inet4"}, false) },
			wantErr: "unsupported HashFamily",
		},
		{
			name:    "CreateSet validates the name",
			run:     func(f *FakeIPSet) error { return f.CreateSet(&ipset.IPSet{Name: "has space"}, false) },
			wantErr: "whitespace",
		},
		{
			name: "swap of different types fails at its line",
			run: func(f *FakeIPSet) error {
				var b ipset.Batch
				b.Create(&ipset.IPSet{Name: "A", SetType: ipset.HashIP})
				b.Create(&ipset.IPSet{Name: "B", SetType: ipset.HashIPPort})
				b.Swap("A", "B")
				return f.Restore(&b, false)
			},
			wantErr: "line 3 (swap A B)",
			check: func(t *testing.T, f *FakeIPSet) {
				if f.Restores != 1 || len(f.Sets) != 2 {
					t.Errorf("Restores = %d, sets = %v", f.Restores, f.Sets)
				}
			},
		},
		{
			name: "swap keeps names and exchanges contents",
			run: func(f *FakeIPSet) error {
				var b ipset.Batch
				b.Create(&ipset.IPSet{Name: "A", SetType: ipset.HashIP, MaxElem: 5})
				b.Create(&ipset.IPSet{Name: "B", SetType: ipset.HashIP, MaxElem: 9})
				b.Add("A", "198.18.0.1")
				b.Swap("A", "B")
				return f.Restore(&b, false)
			},
			check: func(t *testing.T, f *FakeIPSet) {
				if f.Sets["A"].Name != "A" || f.Sets["A"].MaxElem != 9 || f.Sets["B"].MaxElem != 5 {
					t.Errorf("sets after swap: A=%+v B=%+v", f.Sets["A"], f.Sets["B"])
				}
				if f.Entries["A"].Len() != 0 || !f.Entries["B"].Has("198.18.0.1") {
					t.Errorf("entries after swap: A=%v B=%v", f.Entries["A"], f.Entries["B"])
				}
			},
		},
		{
			name: "invalid batch is refused before any change",
			run: func(f *FakeIPSet) error {
				var b ipset.Batch
				b.Create(&ipset.IPSet{Name: "A", SetType: ipset.HashIP})
				b.Add("A", "")
				return f.Restore(&b, false)
			},
			wantErr: "invalid entry",
			check: func(t *testing.T, f *FakeIPSet) {
				if len(f.Sets) != 0 || f.Restores != 0 {
					t.Errorf("refused batch changed state: %v, restores %d", f.Sets, f.Restores)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake("v7.17")
			err := tc.run(f)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
	if err := NewFake("").CreateSet(nil, false); err == nil {
		t.Error("CreateSet(nil) succeeded")
	}
	if err := NewFake("").AddEntry("1.2.3.4", nil, false); err == nil {
		t.Error("AddEntry(nil set) succeeded")
	}
	if err := NewFake("").Restore(nil, false); err != nil {
		t.Errorf("Restore(nil) = %v", err)
	}
	if v, err := NewFake("v6.38").GetVersion(); v != "v6.38" || err != nil {
		t.Errorf("GetVersion = %q, %v", v, err)
	}
	var re *ipset.RestoreError
	f := NewFake("")
	var b ipset.Batch
	b.Flush("NOPE")
	if err := f.Restore(&b, true); !errors.As(err, &re) || !ipset.IsNotFoundError(err) {
		t.Errorf("flush of missing set in restore: %v", err)
	}
}
