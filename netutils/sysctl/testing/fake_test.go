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
	"io/fs"
	"testing"
)

func TestFake(t *testing.T) {
	boom := errors.New("boom")
	type op struct {
		set     bool
		name    string
		val     int
		want    int
		wantErr error
	}
	tests := []struct {
		name      string
		getErrors map[string]error
		setErrors map[string]error
		ops       []op
		wantState map[string]int
	}{
		{
			name: "unset key reads as not exist",
			ops:  []op{{name: "net/ipv4/ip_forward", want: -1, wantErr: fs.ErrNotExist}},
		},
		{
			name: "both notations address one key",
			ops: []op{
				{set: true, name: "net.ipv4.ip_forward", val: 1},
				{name: "net/ipv4/ip_forward", want: 1},
				{set: true, name: "net/ipv4/conf/eth0.100/rp_filter", val: 2},
				{name: "net.ipv4.conf.eth0/100.rp_filter", want: 2},
			},
			wantState: map[string]int{"net/ipv4/ip_forward": 1, "net/ipv4/conf/eth0.100/rp_filter": 2},
		},
		{
			name:      "injected errors",
			getErrors: map[string]error{"vm/panic_on_oom": boom},
			setErrors: map[string]error{"kernel/panic": boom},
			ops: []op{
				{set: true, name: "vm/panic_on_oom", val: 0},
				{name: "vm/panic_on_oom", want: -1, wantErr: boom},
				{set: true, name: "kernel.panic", val: 10, wantErr: boom},
			},
			wantState: map[string]int{"vm/panic_on_oom": 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake()
			f.GetErrors, f.SetErrors = tc.getErrors, tc.setErrors
			for _, o := range tc.ops {
				if o.set {
					if err := f.SetSysctl(o.name, o.val); !errors.Is(err, o.wantErr) || (err == nil) != (o.wantErr == nil) {
						t.Fatalf("SetSysctl(%q) error = %v, want %v", o.name, err, o.wantErr)
					}
					continue
				}
				got, err := f.GetSysctl(o.name)
				if got != o.want || !errors.Is(err, o.wantErr) || (err == nil) != (o.wantErr == nil) {
					t.Fatalf("GetSysctl(%q) = %d, %v; want %d, %v", o.name, got, err, o.want, o.wantErr)
				}
			}
			got := f.Snapshot()
			if len(got) != len(tc.wantState) {
				t.Fatalf("state = %v, want %v", got, tc.wantState)
			}
			for k, v := range tc.wantState {
				if got[k] != v {
					t.Errorf("state[%q] = %d, want %d", k, got[k], v)
				}
			}
		})
	}
}
