//go:build linux

package e2e

import (
	"testing"
)

func TestParseReply(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    reply
		wantErr bool
	}{
		{"a1 198.18.129.50:41234\n", reply{pod: "a1", client: "198.18.129.50"}, false},
		{"b1 [fd00:18:1::32]:5353\n", reply{pod: "b1", client: "fd00:18:1::32"}, false},
		{"", reply{}, true},
		{"a1\n", reply{}, true},
		{"a1 198.18.129.50\n", reply{}, true}, // no port
		{"a1 198.18.129.50:1 extra\n", reply{}, true},
	} {
		got, err := parseReply(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseReply(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// FuzzParseReply: whatever comes back over the wire, the parser returns an
// error or a reply naming a pod, never panics.
func FuzzParseReply(f *testing.F) {
	f.Add("a1 198.18.129.50:41234\n")
	f.Add("b1 [fd00:18:1::32]:5353")
	f.Add(" :\n")
	f.Fuzz(func(t *testing.T, in string) {
		r, err := parseReply(in)
		if err == nil && r.pod == "" {
			t.Errorf("parseReply(%q) accepted a reply without a pod name", in)
		}
	})
}
