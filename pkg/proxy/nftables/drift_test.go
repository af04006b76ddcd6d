//go:build linux

package nftables

import (
	"encoding/binary"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// The ledger says a generation span was only ours when our recorded spans
// chain from its start to its end, and not when a gap (another program's
// commit) or a span past its end is in between.
func TestGenLedgerCovers(t *testing.T) {
	l := newGenLedger()
	l.record(10, 11)
	l.record(11, 14)
	l.record(15, 16)
	for _, tc := range []struct {
		from, to uint32
		want     bool
	}{
		{10, 10, true},
		{10, 11, true},
		{10, 14, true},
		{11, 14, true},
		{10, 15, false}, // 14 -> 15 was someone else's
		{10, 16, false},
		{15, 16, true},
		{10, 12, false}, // inside our span: a generation we never saw
		{9, 11, false},
	} {
		if got := l.covers(tc.from, tc.to) || tc.from == tc.to; got != tc.want {
			t.Errorf("covers(%d, %d) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	var none *genLedger
	if none.covers(1, 2) {
		t.Error("a nil ledger covers a span")
	}
}

// Kernel element bytes are formatted as nft writes the view's keys and
// values.
func TestAppendFields(t *testing.T) {
	port := func(p uint16) []byte { return append(binary.BigEndian.AppendUint16(nil, p), 0, 0) }
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	v6 := []byte{0xfd, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a, 0xb4, 0, 1}
	for _, tc := range []struct {
		name   string
		fields string
		data   []byte
		ipv6   bool
		want   string
		ok     bool
	}{
		{"address", "a", []byte{172, 30, 0, 41}, false, "172.30.0.41", true},
		{"service-ips key", "apn", cat([]byte{172, 30, 0, 41}, []byte{6, 0, 0, 0}, port(80)), false, "172.30.0.41 . tcp . 80", true},
		{"hairpin key, IPv6", "aapn", cat(v6, v6, []byte{17, 0, 0, 0}, port(53)), true, "fd00:10::ab4:1 . fd00:10::ab4:1 . udp . 53", true},
		{"unknown protocol", "pn", cat([]byte{47, 0, 0, 0}, port(1)), false, "47 . 1", true},
		{"endpoint slot", "s", binary.NativeEndian.AppendUint32(nil, 300), false, "300", true},
		{"too short", "apn", []byte{172, 30, 0, 41, 6, 0, 0, 0}, false, "172.30.0.41 . tcp . ", false},
		{"too long", "a", []byte{1, 2, 3, 4, 5, 6, 7, 8}, false, "1.2.3.4", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := appendFields(nil, tc.fields, tc.data, tc.ipv6)
			if string(got) != tc.want || ok != tc.ok {
				t.Errorf("got %q ok=%v, want %q ok=%v", got, ok, tc.want, tc.ok)
			}
		})
	}
	for code, want := range map[int32]string{verdictGoto: "goto c", verdictJump: "jump c", 0: "drop", 1: "accept", -5: "return", 7: "verdict 7"} {
		if got := string(appendVerdict(nil, code, []byte("c\x00"))); got != want {
			t.Errorf("verdict %d: got %q, want %q", code, got, want)
		}
	}
}

// fixedAfter follows a plan's operations on the objects no service port
// owns: chains added and flushed with their rules' comments, chains and
// sets deleted, elements of the sets the view does not track; and it leaves
// the view's objects alone.
func TestFixedAfter(t *testing.T) {
	c := ptr.To("a comment")
	ops := []op{
		{opAdd, &knftables.Chain{Name: "services"}},
		{opFlush, &knftables.Chain{Name: "services"}},
		{opAdd, &knftables.Rule{Chain: "services", Rule: "x", Comment: c}},
		{opAdd, &knftables.Rule{Chain: "services", Rule: "y"}},
		{opAdd, &knftables.Chain{Name: "gone"}},
		{opDelete, &knftables.Chain{Name: "gone"}},
		{opAdd, &knftables.Chain{Name: "service-X-ns/svc/tcp/p"}},
		{opAdd, &knftables.Rule{Chain: "service-X-ns/svc/tcp/p", Rule: "z"}},
		{opAdd, &knftables.Set{Name: nodePortIPsSet}},
		{opFlush, &knftables.Set{Name: nodePortIPsSet}},
		{opAdd, &knftables.Element{Set: nodePortIPsSet, Key: []string{"192.168.0.2"}}},
		{opAdd, &knftables.Map{Name: serviceIPsMap}},
		{opAdd, &elemOp{c: cServiceIPs, key: "k", value: "goto x"}},
		{opAdd, &knftables.Map{Name: endpointMapName(0, 1)}},
		{opAdd, &knftables.Set{Name: affinitySetPrefix + "X-ns/svc/tcp/p__10.0.0.1/80"}},
	}
	var d driftState
	f := d.fixedAfter(ops, true)
	if got := f.chains["services"]; len(got) != 2 || got[0] != c || got[1] != nil {
		t.Errorf("services: got %v, want [comment, none]", got)
	}
	if _, ok := f.chains["gone"]; ok {
		t.Error("a deleted chain is expected")
	}
	if _, ok := f.chains["service-X-ns/svc/tcp/p"]; ok {
		t.Error("a service port's chain is in the fixed objects")
	}
	if s := f.sets[nodePortIPsSet]; s.isMap || len(s.elements) != 1 || s.elements["192.168.0.2"] != "" {
		t.Errorf("nodeport-ips: got %+v", s)
	}
	if s, ok := f.sets[serviceIPsMap]; !ok || !s.isMap || s.elements != nil {
		t.Errorf("service-ips: got %+v (ok %v), want a map whose elements the view tracks", s, ok)
	}
	if len(f.sets) != 2 {
		t.Errorf("fixed sets %v, want only nodeport-ips and service-ips", f.sets)
	}

	// A partial sync that rewrites one fixed chain keeps the others.
	d.fixed = f
	g := d.fixedAfter([]op{
		{opAdd, &knftables.Chain{Name: clusterIPsCheckChain}},
		{opFlush, &knftables.Chain{Name: clusterIPsCheckChain}},
		{opAdd, &knftables.Rule{Chain: clusterIPsCheckChain, Rule: "r"}},
	}, false)
	if len(g.chains["services"]) != 2 || len(g.chains[clusterIPsCheckChain]) != 1 {
		t.Errorf("after a partial sync: %v", g.chains)
	}
	if len(f.chains[clusterIPsCheckChain]) != 0 {
		t.Error("fixedAfter changed the fixed objects it started from")
	}
}
