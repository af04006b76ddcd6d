package util

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
)

func TestLineBuffer(t *testing.T) {
	tests := []struct {
		name      string
		write     func(LineBuffer)
		want      string
		wantLines int
	}{
		{"empty", func(LineBuffer) {}, "", 0},
		{"strings", func(b LineBuffer) { b.Write("-A", "KUBE-SERVICES", "-j", "ACCEPT") }, "-A KUBE-SERVICES -j ACCEPT\n", 1},
		{"string slices flatten", func(b LineBuffer) {
			b.Write("-A", "X", []string{"-s", "10.0.0.0/8"}, "-j", "RETURN")
		}, "-A X -s 10.0.0.0/8 -j RETURN\n", 1},
		{"empty slice adds no space", func(b LineBuffer) { b.Write("a", []string{}, "b") }, "a b\n", 1},
		{"leading slice", func(b LineBuffer) { b.Write([]string{"a", "b"}, "c") }, "a b c\n", 1},
		{"no args is an empty line", func(b LineBuffer) { b.Write() }, "\n", 1},
		{"other types formatted, not panicking", func(b LineBuffer) { b.Write("n", 5) }, "n 5\n", 1},
		{"bytes", func(b LineBuffer) {
			b.WriteBytes([]byte("*filter"))
			b.WriteBytes([]byte("COMMIT"))
		}, "*filter\nCOMMIT\n", 2},
		{"reset", func(b LineBuffer) {
			b.Write("x")
			b.Reset()
			b.Write("y")
		}, "y\n", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewLineBuffer()
			tc.write(b)
			if got := b.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
			if got := string(b.Bytes()); got != tc.want {
				t.Errorf("Bytes() = %q, want %q", got, tc.want)
			}
			if b.Lines() != tc.wantLines {
				t.Errorf("Lines() = %d, want %d", b.Lines(), tc.wantLines)
			}

			d := NewDiscardLineBuffer()
			tc.write(d)
			if d.String() != "" || len(d.Bytes()) != 0 {
				t.Errorf("discard buffer kept data: %q", d.String())
			}
			if d.Lines() != tc.wantLines {
				t.Errorf("discard Lines() = %d, want %d", d.Lines(), tc.wantLines)
			}
		})
	}
}

func TestLineBufferMarshalLog(t *testing.T) {
	b := NewLineBuffer()
	b.Write("a", "b")
	b.Write("c")
	m, ok := b.(logr.Marshaler)
	if !ok {
		t.Fatal("line buffer does not implement logr.Marshaler")
	}
	if diff := cmp.Diff([]string{"a b", "c", ""}, m.MarshalLog()); diff != "" {
		t.Errorf("MarshalLog (-want +got):\n%s", diff)
	}
}

func BenchmarkLineBufferWrite(b *testing.B) {
	buf := NewLineBuffer()
	args := []string{"-m", "comment", "--comment", "ns/svc:p80 cluster IP"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%1000 == 0 {
			buf.Reset()
		}
		buf.Write("-A", "KUBE-SERVICES", args, "-d", "10.0.0.1/32", "-p", "tcp", "--dport", "80", "-j", "KUBE-SVC-XPGD46QRK7WJZT7O")
	}
}
