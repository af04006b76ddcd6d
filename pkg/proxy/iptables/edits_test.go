//go:build linux

package iptables

import (
	"fmt"
	"strings"
	"testing"
)

func TestEditDispatch(t *testing.T) {
	svc := func(names ...string) string {
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "-A KUBE-SERVICES -d %s -j KUBE-SVC-%s\n", n, n)
		}
		return b.String()
	}
	const last = "-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\n"
	many := make([]string, maxDispatchEdits+1)
	for i := range many {
		many[i] = fmt.Sprint("n", i)
	}
	for _, tc := range []struct {
		name, old, new string
		want           string // edits; "" with ok false: rewrite
		ok             bool
	}{
		{"one added in the middle", svc("a", "c") + last, svc("a", "b", "c") + last,
			"-I KUBE-SERVICES 2 -d b -j KUBE-SVC-b\n", true},
		{"one added first", svc("b") + last, svc("a", "b") + last,
			"-I KUBE-SERVICES 1 -d a -j KUBE-SVC-a\n", true},
		{"one removed", svc("a", "b", "c") + last, svc("a", "c") + last,
			"-D KUBE-SERVICES -d b -j KUBE-SVC-b\n", true},
		{"one replaced", svc("a", "b", "c") + last, svc("a", "B", "c") + last,
			"-D KUBE-SERVICES -d b -j KUBE-SVC-b\n-I KUBE-SERVICES 2 -d B -j KUBE-SVC-B\n", true},
		{"apart: deletions first, then insertions in order", svc("a", "b", "c", "d", "e") + last, svc("a", "a2", "c", "d", "e2") + last,
			"-D KUBE-SERVICES -d b -j KUBE-SVC-b\n-D KUBE-SERVICES -d e -j KUBE-SVC-e\n-I KUBE-SERVICES 2 -d a2 -j KUBE-SVC-a2\n-I KUBE-SERVICES 5 -d e2 -j KUBE-SVC-e2\n", true},
		{"both chains, positions each its own", svc("a") + "-A KUBE-NODEPORTS --dport 1 -j X\n" + last,
			svc("a") + "-A KUBE-NODEPORTS --dport 1 -j X\n" + "-A KUBE-NODEPORTS --dport 2 -j Y\n" + svc("b") + last,
			"-I KUBE-SERVICES 2 -d b -j KUBE-SVC-b\n-I KUBE-NODEPORTS 2 --dport 2 -j Y\n", true},
		{"order changed", svc("a", "b", "c") + last, svc("a", "c", "b") + last, "", false},
		{"a duplicate inserted", svc("a", "b") + last, svc("a", "b", "b") + last,
			"-I KUBE-SERVICES 3 -d b -j KUBE-SVC-b\n", true},
		{"a rule to delete stands twice", svc("x", "a", "x", "b") + last, svc("x", "a", "b") + last, "", false},
		{"a duplicate kept once", svc("a", "x", "b", "x", "c") + last, svc("a", "x", "y", "c") + last, "", false},
		{"another chain", svc("a") + "-A KUBE-EXT-X -j Y\n" + last, svc("a", "b") + last, "", false},
		{"too many", last, svc(many...) + last, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tb tables
			tb.dispatch.b = []byte(tc.new)
			ok := tb.editDispatch([]byte(tc.old))
			if ok != tc.ok || string(tb.edits.b) != tc.want {
				t.Errorf("got ok=%v, edits:\n%s\nwant ok=%v, edits:\n%s", ok, tb.edits.b, tc.ok, tc.want)
			}
			if want := strings.Count(tc.want, "-I "); tb.editInserts != want {
				t.Errorf("editInserts = %d, want %d", tb.editInserts, want)
			}
		})
	}
}
