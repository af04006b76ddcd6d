package nfacct

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// attr encodes one netlink attribute with padding.
func attr(typ uint16, val []byte) []byte {
	l := 4 + len(val)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(b[0:2], uint16(l))
	binary.NativeEndian.PutUint16(b[2:4], typ)
	copy(b[4:], val)
	return b
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func message(attrs ...[]byte) []byte {
	m := []byte{0, 0, 0, 0} // nfgenmsg
	for _, a := range attrs {
		m = append(m, a...)
	}
	return m
}

func encode(c Counter) []byte {
	return message(attr(attrName, append([]byte(c.Name), 0)), attr(attrPackets, u64(c.Packets)), attr(attrBytes, u64(c.Bytes)))
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		msg     []byte
		want    *Counter
		wantErr bool
	}{
		{
			name: "complete",
			msg:  encode(Counter{Name: "dummy-metric", Packets: 123, Bytes: 54321}),
			want: &Counter{Name: "dummy-metric", Packets: 123, Bytes: 54321},
		},
		{
			name: "max length name",
			msg:  encode(Counter{Name: "0123456789012345678901234567890", Packets: 1, Bytes: 2}),
			want: &Counter{Name: "0123456789012345678901234567890", Packets: 1, Bytes: 2},
		},
		{
			name: "unknown attributes skipped, any order",
			msg: message(attr(attrBytes, u64(9)), attr(7, []byte{1, 2, 3}), attr(attrName, []byte("x\x00")),
				attr(8, u64(5)), attr(attrPackets, u64(^uint64(0)))),
			want: &Counter{Name: "x", Packets: ^uint64(0), Bytes: 9},
		},
		{
			name: "name without NUL",
			msg:  message(attr(attrName, []byte("abc")), attr(attrPackets, u64(1)), attr(attrBytes, u64(1))),
			want: &Counter{Name: "abc", Packets: 1, Bytes: 1},
		},
		{
			name: "last attribute unpadded",
			msg:  message(attr(attrPackets, u64(1)), attr(attrBytes, u64(1)), attr(attrName, []byte("ab\x00"))[:7]),
			want: &Counter{Name: "ab", Packets: 1, Bytes: 1},
		},
		{name: "empty", msg: nil, wantErr: true},
		{name: "only nfgenmsg", msg: message(), wantErr: true},
		{name: "missing bytes", msg: message(attr(attrName, []byte("x\x00")), attr(attrPackets, u64(1))), wantErr: true},
		{name: "short packets", msg: message(attr(attrName, []byte("x\x00")), attr(attrPackets, []byte{1, 2}), attr(attrBytes, u64(1))), wantErr: true},
		{name: "empty name", msg: message(attr(attrName, nil), attr(attrPackets, u64(1)), attr(attrBytes, u64(1))), wantErr: true},
		{name: "attribute length below header", msg: append(message(), 2, 0, 1, 0), wantErr: true},
		{name: "attribute length beyond buffer", msg: append(message(), 200, 0, 1, 0, 'a'), wantErr: true},
		{name: "truncated header", msg: append(message(), 8, 0), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode(tc.msg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, errMalformed) {
					t.Errorf("error %v does not wrap errMalformed", err)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decode (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(Counter{Name: "ct_state_invalid_dropped_pkts", Packets: 7, Bytes: 700}))
	f.Add(message(attr(9, nil)))
	f.Add([]byte{0, 0, 0, 0, 4, 0, 1, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, msg []byte) {
		c, err := decode(msg)
		if err != nil {
			return
		}
		if len(c.Name) == 0 {
			t.Fatalf("decoded a counter without a name from %x", msg)
		}
		// A successfully decoded counter must survive a round trip.
		if len(c.Name) <= MaxLength && !containsNUL(c.Name) {
			again, err := decode(encode(*c))
			if err != nil || *again != *c {
				t.Fatalf("round trip of %+v gave %+v, %v", c, again, err)
			}
		}
	})
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

func BenchmarkDecode(b *testing.B) {
	msg := encode(Counter{Name: "ct_state_invalid_dropped_pkts", Packets: 1 << 40, Bytes: 1 << 50})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decode(msg); err != nil {
			b.Fatal(err)
		}
	}
}
