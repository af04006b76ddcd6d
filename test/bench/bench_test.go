//go:build linux

package main

import (
	"fmt"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseNFTJSON(t *testing.T) {
	for _, tc := range []struct {
		name         string
		in           string
		rules, elems int
		wantErr      bool
	}{
		{"empty table", `{"nftables":[{"metainfo":{"version":"1.0.9"}},{"table":{"family":"ip","name":"kube-proxy"}}]}`, 0, 0, false},
		{"rules and elements", `{"nftables":[{"metainfo":{}},
			{"map":{"name":"service-ips","elem":[[{"concat":["198.19.0.1","tcp",80]},{"goto":{"target":"service-x"}}],[1,2]]}},
			{"set":{"name":"cluster-ips","elem":["198.19.0.1"]}},
			{"set":{"name":"empty"}},
			{"rule":{"chain":"a"}},{"rule":{"chain":"b"}},{"chain":{"name":"a"}}]}`, 2, 3, false},
		{"not JSON", `table ip kube-proxy {`, 0, 0, true},
		{"set of the wrong shape", `{"nftables":[{"set":{"elem":"x"}}]}`, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules, elems, err := parseNFTJSON([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && (rules != tc.rules || elems != tc.elems) {
				t.Errorf("got %d rules, %d elements; want %d, %d", rules, elems, tc.rules, tc.elems)
			}
		})
	}
}

func FuzzParseNFTJSON(f *testing.F) {
	f.Add([]byte(`{"nftables":[{"rule":{}},{"map":{"elem":[1,2]}}]}`))
	f.Add([]byte(`{"nftables":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		rules, elems, err := parseNFTJSON(in)
		if err == nil && (rules < 0 || elems < 0) {
			t.Errorf("negative counts %d %d", rules, elems)
		}
	})
}

func TestMakeSliceAddresses(t *testing.T) {
	// Addresses must stay inside the cluster CIDR 198.18.128.0/17 and a change
	// (gen) must move the first endpoint and nothing else's count.
	for _, tc := range []struct{ i, eps, gen int }{{0, 10, 0}, {9999, 10, 0}, {9999, 10, 3}, {59999, 200, 5}} {
		s := makeSlice(tc.i, tc.eps, tc.gen)
		if len(s.Endpoints) != tc.eps {
			t.Fatalf("slice %d: %d endpoints, want %d", tc.i, len(s.Endpoints), tc.eps)
		}
		for _, ep := range s.Endpoints {
			a := ep.Addresses[0]
			var b, c, d, e int
			if n, err := fmtSscan(a, &b, &c, &d, &e); err != nil || n != 4 || b != 198 || c != 18 || d < 128 || d > 255 || e < 1 || e > 254 {
				t.Errorf("slice %d: endpoint address %s outside 198.18.128.0/17", tc.i, a)
			}
		}
		if tc.gen > 0 {
			base := makeSlice(tc.i, tc.eps, 0)
			if s.Endpoints[0].Addresses[0] == base.Endpoints[0].Addresses[0] {
				t.Errorf("slice %d: generation %d did not change the first endpoint", tc.i, tc.gen)
			}
			for j := 1; j < tc.eps; j++ {
				if s.Endpoints[j].Addresses[0] != base.Endpoints[j].Addresses[0] {
					t.Errorf("slice %d: generation %d changed endpoint %d too", tc.i, tc.gen, j)
				}
			}
		}
	}
}

func fmtSscan(s string, a, b, c, d *int) (int, error) {
	return fmt.Sscanf(s, "%d.%d.%d.%d", a, b, c, d)
}
