//go:build linux

package nftables

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	gnftables "github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// wireMessage is a netlink message without the fields a sender numbers
// (sequence, port id).
type wireMessage struct {
	Type  uint16
	Flags uint16
	Data  []byte
}

// splitBatch splits an encoded batch into its messages, failing on any
// length that does not add up.
func splitBatch(t *testing.T, b []byte) []wireMessage {
	t.Helper()
	var out []wireMessage
	for len(b) > 0 {
		if len(b) < nlmsgHeaderLen {
			t.Fatalf("%d bytes left after the last message", len(b))
		}
		size := int(binary.NativeEndian.Uint32(b))
		if size < nlmsgHeaderLen || size > len(b) || size%4 != 0 {
			t.Fatalf("message of %d bytes with %d left", size, len(b))
		}
		out = append(out, wireMessage{Type: binary.NativeEndian.Uint16(b[4:]), Flags: binary.NativeEndian.Uint16(b[6:]), Data: b[nlmsgHeaderLen:size]})
		b = b[size:]
	}
	return out
}

// TestBatchMatchesGoogleNFTables checks the hand-encoded batches byte for
// byte against what github.com/google/nftables sends for the same elements:
// message types, nesting, attribute types, padding and verdicts. What the
// kernel ignores is left out of the comparison: the order of a message's
// top-level attributes, google/nftables' NFTA_SET_ELEM_LIST_SET_ID of 0 (an
// ID names a set created in the same batch), its numbering of the element
// list's entries 1, 2, 3... where libnftnl (and we) give each type
// NFTA_LIST_ELEM, and its NLM_F_CREATE on deletions.
func TestBatchMatchesGoogleNFTables(t *testing.T) {
	for _, tc := range []struct {
		family v1.IPFamily
		ip     func(string) string
	}{{v1.IPv4Protocol, func(s string) string { return s }}, {v1.IPv6Protocol, func(s string) string { return "fd00::" + strings.ReplaceAll(s, ".", ":") }}} {
		t.Run(string(tc.family), func(t *testing.T) {
			ip := tc.ip
			pl := &plan{}
			pl.addSlots("endpoints-3-tcp-07", 40, []string{ip("10.180.0.1") + " . 80", ip("10.180.0.2") + " . 65535", ip("10.180.0.3") + " . 1"}, 0, 3)
			pl.deleteSlots("endpoints-3-tcp-07", 12, 0, 2)
			pl.addElement(cServiceIPs, ip("172.30.0.41")+" . tcp . 80", "goto service-ABCDEFGH-ns/svc/tcp/p80", nil)
			pl.addElement(cServiceIPs, ip("172.30.0.42")+" . udp . 53", "jump external-ABCDEFGH-ns/a-much-longer-service-name/udp/dns", nil)
			pl.deleteElement(cServiceIPs, ip("172.30.0.43")+" . sctp . 9")
			pl.addElement(cClusterIPs, ip("172.30.0.41"), "", nil)
			pl.addElement(cServiceNodePorts, "tcp . 30080", "goto external-ABCDEFGH-ns/svc/tcp/p80", nil)
			pl.addElement(cHairpin, ip("10.180.0.1")+" . "+ip("10.180.0.1")+" . tcp . 80", "", nil)
			pl.deleteElement(cHairpin, ip("10.180.0.9")+" . "+ip("10.180.0.9")+" . udp . 53")

			w := newNetlinkElements(tc.family)
			if err := w.encode(pl.ops); err != nil {
				t.Fatal(err)
			}
			batch := w.enc.finish()
			if len(batch) > batchBytes(pl.ops) {
				t.Errorf("batch of %d bytes, batchBytes reserved %d", len(batch), batchBytes(pl.ops))
			}
			got := canonical(t, splitBatch(t, batch))

			want := canonical(t, googleBatch(t, tc.family, pl.ops, w.ipv6))
			for i := range want {
				if want[i].Type&0xff == unix.NFT_MSG_DELSETELEM {
					want[i].Flags &^= unix.NLM_F_CREATE
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("batch differs from google/nftables' (-google +ours):\n%s", diff)
			}
		})
	}
}

// canonical sorts each element message's top-level attributes by type,
// drops a zero NFTA_SET_ELEM_LIST_SET_ID and types every entry of the
// element list NFTA_LIST_ELEM.
func canonical(t *testing.T, msgs []wireMessage) []wireMessage {
	t.Helper()
	for i, m := range msgs {
		if m.Type>>8 != unix.NFNL_SUBSYS_NFTABLES {
			continue
		}
		var attrs [][]byte
		for b := m.Data[nfgenHeaderLen:]; len(b) > 0; {
			l := int(binary.NativeEndian.Uint16(b))
			if l < attrHeaderLen || l > len(b) {
				t.Fatalf("attribute of %d bytes with %d left", l, len(b))
			}
			padded := min(len(b), (l+3)&^3)
			a := slices.Clone(b[:padded])
			if binary.NativeEndian.Uint16(a[2:])&^uint16(nlaNested) == unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				for list := a[attrHeaderLen:l]; len(list) >= attrHeaderLen; {
					binary.NativeEndian.PutUint16(list[2:], nftaListElem|nlaNested)
					list = list[min(len(list), (int(binary.NativeEndian.Uint16(list))+3)&^3):]
				}
			}
			if !(binary.NativeEndian.Uint16(a[2:]) == unix.NFTA_SET_ELEM_LIST_SET_ID && binary.BigEndian.Uint32(a[4:]) == 0) {
				attrs = append(attrs, a)
			}
			b = b[padded:]
		}
		slices.SortStableFunc(attrs, func(a, b []byte) int {
			return cmpInt(binary.NativeEndian.Uint16(a[2:])&^uint16(nlaNested), binary.NativeEndian.Uint16(b[2:])&^uint16(nlaNested))
		})
		data := slices.Clone(m.Data[:nfgenHeaderLen])
		for _, a := range attrs {
			data = append(data, a...)
		}
		msgs[i].Data = data
	}
	return msgs
}

func cmpInt(a, b uint16) int { return int(a) - int(b) }

// googleBatch encodes ops with google/nftables, one SetAddElements or
// SetDeleteElements call per run of one set and kind, and returns what it
// would have sent.
func googleBatch(t *testing.T, family v1.IPFamily, ops []op, ipv6 bool) []wireMessage {
	t.Helper()
	var sent []netlink.Message
	conn, err := gnftables.New(gnftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		if req != nil {
			sent = append(sent, req...)
			return nil, nil
		}
		// An acknowledgement for every message that asked for one.
		return []netlink.Message{{Header: netlink.Header{Type: netlink.Error}, Data: make([]byte, 4)}}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	tf := gnftables.TableFamilyIPv4
	if family == v1.IPv6Protocol {
		tf = gnftables.TableFamilyIPv6
	}
	table := &gnftables.Table{Name: kubeProxyTable, Family: tf}
	must := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	type run struct {
		set   string
		isMap bool
		add   bool
		elems []gnftables.SetElement
	}
	var runs []*run
	push := func(set string, isMap, add bool, e gnftables.SetElement) {
		if n := len(runs); n == 0 || runs[n-1].set != set || runs[n-1].add != add {
			runs = append(runs, &run{set: set, isMap: isMap, add: add})
		}
		r := runs[len(runs)-1]
		r.elems = append(r.elems, e)
	}
	for _, o := range ops {
		add := o.verb == opAdd
		switch obj := o.obj.(type) {
		case *slotBatch:
			for i := obj.from; i < obj.to; i++ {
				e := gnftables.SetElement{Key: appendSlotKey(nil, obj.base+uint32(i))}
				if add {
					e.Val = must(appendSlotValue(nil, obj.values[i], ipv6))
				}
				push(obj.name, true, add, e)
			}
		case *elemOp:
			name := containerNames[obj.c]
			e := gnftables.SetElement{Key: must(appendKey(nil, name, obj.key, ipv6))}
			if add && !obj.c.isSet() {
				code, chain, err := parseVerdict(obj.value)
				if err != nil {
					t.Fatal(err)
				}
				e.VerdictData = &expr.Verdict{Kind: expr.VerdictKind(code), Chain: chain}
			}
			push(name, !obj.c.isSet(), add, e)
		default:
			t.Fatalf("unexpected op %T", o.obj)
		}
	}
	for _, r := range runs {
		set := &gnftables.Set{Table: table, Name: r.set, IsMap: r.isMap}
		var err error
		if r.add {
			err = conn.SetAddElements(set, r.elems)
		} else {
			err = conn.SetDeleteElements(set, r.elems)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}
	out := make([]wireMessage, len(sent))
	for i, m := range sent {
		out[i] = wireMessage{Type: uint16(m.Header.Type), Flags: uint16(m.Header.Flags), Data: m.Data}
	}
	return out
}

// TestBatchSplitsLongRuns: a run of elements larger than one message can
// hold is cut into several messages of at most maxMessageBytes of elements,
// each one complete.
func TestBatchSplitsLongRuns(t *testing.T) {
	values := make([]string, 3000)
	for i := range values {
		values[i] = fmt.Sprintf("10.%d.%d.%d . 8080", i/65536, i/256%256, i%256)
	}
	pl := &plan{}
	pl.addSlots("endpoints-1-tcp-00", 0, values, 0, len(values))
	w := newNetlinkElements(v1.IPv4Protocol)
	if err := w.encode(pl.ops); err != nil {
		t.Fatal(err)
	}
	batch := w.enc.finish()
	if len(batch) > batchBytes(pl.ops) {
		t.Errorf("batch of %d bytes, batchBytes reserved %d", len(batch), batchBytes(pl.ops))
	}
	msgs := splitBatch(t, batch)
	if len(msgs) < 4 { // begin, at least two element messages, end
		t.Fatalf("%d messages, want the 3000 elements cut into several", len(msgs))
	}
	if w.enc.messages() != len(msgs)-2 {
		t.Errorf("encoder counts %d element messages, batch has %d", w.enc.messages(), len(msgs)-2)
	}
	elements := 0
	for _, m := range msgs[1 : len(msgs)-1] {
		// nfgenmsg, then the table and set names, then the element list.
		attrs := m.Data[nfgenHeaderLen:]
		for len(attrs) > 0 {
			l, typ := int(binary.NativeEndian.Uint16(attrs)), binary.NativeEndian.Uint16(attrs[2:])
			if typ&^uint16(nlaNested) == unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				if l > maxMessageBytes {
					t.Errorf("element list of %d bytes, more than %d", l, maxMessageBytes)
				}
				for list := attrs[attrHeaderLen:l]; len(list) > 0; {
					el := int(binary.NativeEndian.Uint16(list))
					elements++
					list = list[min(len(list), (el+3)&^3):]
				}
			}
			attrs = attrs[min(len(attrs), (l+3)&^3):]
		}
	}
	if elements != len(values) {
		t.Errorf("%d elements in the messages, want %d", elements, len(values))
	}
}

// TestBadElementSendsNothing: an element that cannot be encoded fails the
// write before a socket is opened or anything is sent.
func TestBadElementSendsNothing(t *testing.T) {
	pl := &plan{}
	pl.addSlots("endpoints-1-tcp-00", 0, []string{"10.0.0.1 . 80", "10.0.0.2 . http"}, 0, 2)
	w := newNetlinkElements(v1.IPv4Protocol)
	err := w.writeElements(t.Context(), pl.ops)
	if err == nil || !strings.Contains(err.Error(), `"http"`) {
		t.Fatalf("write of a bad port: error %v, want one naming it", err)
	}
	if w.sock != nil {
		t.Errorf("a socket was opened for a batch that could not be encoded")
	}
}

// TestKernelBatchErrors: a batch the kernel refuses in part changes nothing,
// and the write reports the errno and the set of the message it refused; a
// batch to a set that does not exist fails the same way; the writer then
// opens a new socket and its next batch lands.
func TestKernelBatchErrors(t *testing.T) {
	tf := families[0]
	inNetns(t, func() {
		ctx := t.Context()
		s, nft := realSyncer(t, tf, nil)
		if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
			t.Fatal(err)
		}
		w := newNetlinkElements(tf.family)
		defer w.close()
		hairpins := func() int {
			t.Helper()
			elems, err := nft.ListElements(ctx, "set", hairpinConnectionsSet)
			if err != nil {
				t.Fatal(err)
			}
			return len(elems)
		}
		before := hairpins()

		pl := &plan{}
		pl.addElement(cHairpin, "10.9.9.9 . 10.9.9.9 . tcp . 80", "", nil)
		pl.deleteElement(cClusterIPs, "172.31.255.254") // not there
		err := w.writeElements(ctx, pl.ops)
		if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), clusterIPsSet) {
			t.Errorf("deleting a missing element: error %v, want ENOENT naming %s", err, clusterIPsSet)
		}
		if got := hairpins(); got != before {
			t.Errorf("the refused batch's add landed: %d hairpin elements, want %d", got, before)
		}
		if w.sock != nil {
			t.Errorf("the socket was kept after a failed batch")
		}

		pl = &plan{}
		pl.addSlots("endpoints-999-tcp-00", 0, []string{"10.0.0.1 . 80"}, 0, 1)
		if err := w.writeElements(ctx, pl.ops); !errors.Is(err, unix.ENOENT) {
			t.Errorf("writing to a map that does not exist: error %v, want ENOENT", err)
		}

		pl = &plan{}
		pl.addElement(cHairpin, "10.9.9.9 . 10.9.9.9 . tcp . 80", "", nil)
		if err := w.writeElements(ctx, pl.ops); err != nil {
			t.Fatalf("a good batch after failed ones: %v", err)
		}
		if got := hairpins(); got != before+1 {
			t.Errorf("%d hairpin elements after the good batch, want %d", got, before+1)
		}
	})
}

func TestEncodeElements(t *testing.T) {
	slot := func(ipv6 bool, value string) ([]byte, error) {
		return appendSlotValue(nil, value, ipv6)
	}
	key := func(e *knftables.Element) func(bool, string) ([]byte, error) {
		return func(ipv6 bool, in string) ([]byte, error) {
			return appendKey(nil, e.Set+e.Map, in, ipv6)
		}
	}
	hairpin := key(&knftables.Element{Set: hairpinConnectionsSet})
	clusterIP := key(&knftables.Element{Set: clusterIPsSet})
	serviceIP := key(&knftables.Element{Map: serviceIPsMap})
	nodePort := key(&knftables.Element{Map: serviceNodePortsMap})
	for _, tc := range []struct {
		encode  func(bool, string) ([]byte, error)
		in      string
		ipv6    bool
		want    []byte
		wantErr bool
	}{
		{encode: slot, in: "10.180.0.1 . 8080", want: []byte{10, 180, 0, 1, 0x1f, 0x90, 0, 0}},
		{encode: slot, in: "fd00:10::1 . 443", ipv6: true, want: []byte{0xfd, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0xbb, 0, 0}},
		{encode: slot, in: "10.180.0.1 . 65535", want: []byte{10, 180, 0, 1, 0xff, 0xff, 0, 0}},
		{encode: slot, in: "10.180.0.1:80", wantErr: true},
		{encode: slot, in: "10.180.0.1 . 65536", wantErr: true},
		{encode: slot, in: "10.180.0.1 . http", wantErr: true},
		{encode: slot, in: "10.180.0.300 . 80", wantErr: true},
		{encode: slot, in: "10.180.0.1 . 80", ipv6: true, wantErr: true}, // IPv4 into an ip6 table
		{encode: slot, in: "fd00::1 . 80", wantErr: true},                // IPv6 into an ip table
		{encode: slot, in: "::ffff:10.0.0.1 . 80", ipv6: true, wantErr: true},
		{encode: hairpin, in: "10.0.0.1 . 10.0.0.1 . udp . 53", want: []byte{10, 0, 0, 1, 10, 0, 0, 1, 17, 0, 0, 0, 0, 53, 0, 0}},
		{encode: hairpin, in: "10.0.0.1 . 10.0.0.1 . sctp . 80", want: []byte{10, 0, 0, 1, 10, 0, 0, 1, 132, 0, 0, 0, 0, 80, 0, 0}},
		{encode: hairpin, in: "10.0.0.1 . 10.0.0.1 . icmp . 80", wantErr: true},
		{encode: hairpin, in: "10.0.0.1 . 10.0.0.1 . tcp", wantErr: true},
		{encode: hairpin, in: "10.0.0.1 . fd00::1 . tcp . 80", wantErr: true},
		{encode: clusterIP, in: "172.30.0.41", want: []byte{172, 30, 0, 41}},
		{encode: clusterIP, in: "fd00:30::41", ipv6: true, want: []byte{0xfd, 0, 0, 0x30, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x41}},
		{encode: clusterIP, in: "172.30.0.41 . 80", wantErr: true},
		{encode: serviceIP, in: "172.30.0.41 . tcp . 80", want: []byte{172, 30, 0, 41, 6, 0, 0, 0, 0, 80, 0, 0}},
		{encode: serviceIP, in: "172.30.0.41 . tcp", wantErr: true},
		{encode: serviceIP, in: "tcp . 172.30.0.41 . 80", wantErr: true},
		{encode: nodePort, in: "udp . 30053", want: []byte{17, 0, 0, 0, 0x75, 0x65, 0, 0}},
		{encode: nodePort, in: "udp . 70000", wantErr: true},
	} {
		got, err := tc.encode(tc.ipv6, tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("encoding %q (ipv6=%v): error %v, want error: %v", tc.in, tc.ipv6, err, tc.wantErr)
			continue
		}
		if err == nil && !bytes.Equal(got, tc.want) {
			t.Errorf("encoding %q (ipv6=%v) = %v, want %v", tc.in, tc.ipv6, got, tc.want)
		}
	}
	for _, tc := range []struct {
		value     string
		wantCode  int32
		wantChain string
		wantErr   bool
	}{
		{value: "goto service-ABC-ns/svc/tcp/p80", wantCode: int32(expr.VerdictGoto), wantChain: "service-ABC-ns/svc/tcp/p80"},
		{value: "jump external-ABC-ns/svc/tcp/p80", wantCode: int32(expr.VerdictJump), wantChain: "external-ABC-ns/svc/tcp/p80"},
		{value: "drop", wantErr: true},
		{value: "goto", wantErr: true},
		{value: "goto a b", wantErr: true},
		{value: "10.0.0.1 . 80", wantErr: true},
	} {
		code, chain, err := parseVerdict(tc.value)
		if (err != nil) != tc.wantErr {
			t.Errorf("value %q: error %v, want error: %v", tc.value, err, tc.wantErr)
			continue
		}
		if err == nil && (code != tc.wantCode || chain != tc.wantChain) {
			t.Errorf("value %q: verdict %d %q, want %d %q", tc.value, code, chain, tc.wantCode, tc.wantChain)
		}
	}
	if got, want := appendSlotKey(nil, 7), binary.NativeEndian.AppendUint32(nil, 7); !bytes.Equal(got, want) {
		t.Errorf("appendSlotKey(7) = %v, want host byte order %v", got, want)
	}
}

func TestPlanElementsOnly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(*plan)
		want  bool
	}{
		{"empty", func(*plan) {}, false},
		{"slot replacement", func(pl *plan) {
			pl.deleteSlots("endpoints-0-tcp-00", 4, 1, 2)
			pl.addSlots("endpoints-0-tcp-00", 4, []string{"10.0.0.1 . 80", "10.0.0.2 . 80"}, 1, 2)
		}, true},
		{"slots and a rule", func(pl *plan) {
			pl.addSlots("endpoints-0-tcp-00", 4, []string{"10.0.0.1 . 80"}, 0, 1)
			pl.add(&knftables.Rule{Chain: "c", Rule: "drop"})
		}, false},
		{"slots and hairpin elements", func(pl *plan) {
			pl.deleteElement(cHairpin, "10.0.0.1 . 10.0.0.1 . tcp . 80")
			pl.addSlots("endpoints-0-tcp-00", 4, []string{"10.0.0.1 . 80"}, 0, 1)
		}, true},
		{"a slot flush", func(pl *plan) {
			pl.push(op{opFlush, &slotBatch{name: "endpoints-0-tcp-00", to: 1}}, 1)
		}, false},
		{"a cluster IP and a dispatch map element", func(pl *plan) {
			pl.addElement(cClusterIPs, "10.0.0.1", "", nil)
			pl.addElement(cServiceIPs, "10.0.0.1 . tcp . 80", "goto c", nil)
			pl.deleteElement(cServiceNodePorts, "tcp . 30080")
		}, true},
		{"a no-endpoint verdict", func(pl *plan) {
			pl.addElement(cNoEndpointServices, "10.0.0.1 . tcp . 80", "reject", nil)
		}, false},
		{"an element with a comment", func(pl *plan) {
			pl.addElement(cClusterIPs, "10.0.0.1", "", ptr.To("ns/svc"))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := &plan{}
			tc.build(pl)
			if got := pl.elementsOnly(); got != tc.want {
				t.Errorf("elementsOnly() = %v, want %v", got, tc.want)
			}
		})
	}
}

// fakeElements is an elementWriter over a knftables.Fake: it applies the ops
// as nft would (so the table stays comparable with a syncer without one) and
// counts writes, or fails while fail is set.
type fakeElements struct {
	nft    knftables.Interface
	writes atomic.Int32
	fail   atomic.Bool
}

func (f *fakeElements) writeElements(ctx context.Context, ops []op) error {
	f.writes.Add(1)
	if f.fail.Load() {
		return errors.New("injected netlink failure")
	}
	pl := &plan{ops: ops}
	return pl.each(f.nft, 0, func(tx *knftables.Transaction) error { return f.nft.Run(ctx, tx) })
}

// TestEndpointChangesBypassNFT: a sync whose plan only replaces endpoints
// goes to the element writer and runs no nft transaction; anything else goes
// through nft; a failed element write falls back to nft for the same plan,
// and a writer that keeps failing is given up. After every step the table is
// what a syncer without a writer builds.
func TestEndpointChangesBypassNFT(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			ctx := context.Background()
			s, nft := newTestSyncer(t, tf, nil)
			w := &fakeElements{nft: nft.Fake}
			s.elements = w
			ref, refNFT := newTestSyncer(t, tf, nil)
			svcs := slices.Clone(testServices)
			sync := func(step string, in func() syncInput) {
				t.Helper()
				for _, sy := range []*syncer{s, ref} {
					if _, err := sy.sync(ctx, in()); err != nil {
						t.Fatalf("%s: %v", step, err)
					}
				}
				if diff := cmp.Diff(refNFT.Dump(), nft.Dump()); diff != "" {
					t.Fatalf("%s: table differs from a syncer without element writes (-want +got):\n%s", step, diff)
				}
			}
			var runs0, writes0 int32
			expect := func(step string, runs, writes int32) {
				t.Helper()
				if got := nft.runs.Load() - runs0; got != runs {
					t.Errorf("%s: %d nft transactions, want %d", step, got, runs)
				}
				if got := w.writes.Load() - writes0; got != writes {
					t.Errorf("%s: %d element writes, want %d", step, got, writes)
				}
				runs0, writes0 = nft.runs.Load(), w.writes.Load()
			}

			// A cold start (no table) serves nothing yet, so its plan need
			// not be safe to cut: one nft transaction with everything but
			// the elements netlink carries, then those in one write.
			sync("cold start", func() syncInput { return syncInput{full: true, services: models(tf.ip, svcs...)} })
			expect("cold start", 1, 1)

			// A full sync over a live table keeps the order that is safe to
			// cut: endpoint map slots, and dispatch and hairpin elements, go
			// over netlink between nft transactions (the maps, then the
			// chains, then the elements netlink does not carry).
			moved := slices.Clone(svcs)
			moved[1].eps = []tep{moved[1].eps[0], {ip: "10.180.9.8", port: 80}}
			moved = append(moved, tsvc{ns: "ns9", name: "new", portName: "p80", clusterIP: "172.30.0.99", port: 80, nodePort: 3099,
				eps: []tep{{ip: "10.180.9.1", port: 80}, {ip: "10.180.9.2", port: 80}}})
			sync("full sync", func() syncInput { return syncInput{full: true, services: models(tf.ip, moved...)} })
			expect("full sync", 3, 2)
			sync("back", func() syncInput { return syncInput{full: true, services: models(tf.ip, svcs...)} })
			runs0, writes0 = nft.runs.Load(), w.writes.Load()

			// svc2's second endpoint moves: same count, one slot rewritten.
			svcs[1].eps = []tep{svcs[1].eps[0], {ip: "10.180.9.9", port: 80}}
			sync("endpoint moved", func() syncInput { return syncInput{services: models(tf.ip, svcs[1])} })
			expect("endpoint moved", 0, 1)

			// One more endpoint: the policy chain's rule changes, and a small
			// partial sync stays one atomic nft transaction.
			svcs[1].eps = append(svcs[1].eps, tep{ip: "10.180.9.10", port: 80})
			sync("endpoint added", func() syncInput { return syncInput{services: models(tf.ip, svcs[1])} })
			expect("endpoint added", 1, 0)

			// A failed element write: the same plan goes through nft.
			w.fail.Store(true)
			svcs[0].eps = []tep{{ip: "10.180.9.11", port: 80}}
			sync("element write failed", func() syncInput { return syncInput{services: models(tf.ip, svcs[0])} })
			expect("element write failed", 1, 1)
			if s.elements == nil {
				t.Fatalf("one failed element write gave up the writer")
			}

			// Failing maxElementFailures times in a row gives it up.
			for i := 2; i <= maxElementFailures; i++ {
				svcs[0].eps = []tep{{ip: "10.180.9." + itoa(11+i), port: 80}}
				sync("element write failed again", func() syncInput { return syncInput{services: models(tf.ip, svcs[0])} })
			}
			if s.elements != nil {
				t.Fatalf("the writer is still used after %d failures in a row", maxElementFailures)
			}
			writes := w.writes.Load()
			svcs[0].eps = []tep{{ip: "10.180.9.30", port: 80}}
			sync("after giving up", func() syncInput { return syncInput{services: models(tf.ip, svcs[0])} })
			if got := w.writes.Load(); got != writes {
				t.Errorf("a writer that was given up was called again")
			}
		})
	}
}

// runCountingNFT counts the transactions run on any knftables.Interface.
type runCountingNFT struct {
	knftables.Interface
	runs atomic.Int32
}

func (r *runCountingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	r.runs.Add(1)
	return r.Interface.Run(ctx, tx)
}

// TestKernelEndpointChangeOverNetlink moves endpoints through the real
// netlink writer into a kernel table that nft created, and reads the result
// back with nft: slot keys and "ip . port" values must be what nft itself
// would have written (a fake syncer running the same steps through its own
// nft path is the reference), and no nft transaction may run for them.
func TestKernelEndpointChangeOverNetlink(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			inNetns(t, func() {
				ctx := context.Background()
				s, nft := realSyncer(t, tf, nil)
				counting := &runCountingNFT{Interface: nft}
				s.nft = counting
				ref, fake := newTestSyncer(t, tf, nil)
				svcs := slices.Clone(testServices)
				step := func(name string, in func() syncInput) {
					t.Helper()
					for _, sy := range []*syncer{s, ref} {
						if _, err := sy.sync(ctx, in()); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
					}
					if diff := cmp.Diff(snapshot(t, fake), snapshot(t, nft)); diff != "" {
						t.Fatalf("%s: kernel differs from the fake (-fake +kernel):\n%s", name, diff)
					}
				}
				step("full sync", func() syncInput { return syncInput{full: true, services: models(tf.ip, svcs...)} })
				runs := counting.runs.Load()

				// Both of svc2's endpoints move, then svc1's and svc8's (UDP) at once.
				svcs[1].eps = []tep{{ip: "10.180.5.5", port: 8080}, {ip: "10.180.5.6", port: 65535}}
				step("two endpoints moved", func() syncInput { return syncInput{services: models(tf.ip, svcs[1])} })
				svcs[0].eps = []tep{{ip: "10.180.6.1", port: 1}}
				svcs[7].eps = []tep{{ip: "10.180.6.8", port: 5353, local: true}}
				step("two services' endpoints moved", func() syncInput { return syncInput{services: models(tf.ip, svcs[0], svcs[7])} })
				if got := counting.runs.Load(); got != runs {
					t.Errorf("endpoint moves ran %d nft transactions, want none", got-runs)
				}
				want := []string{tf.ip("10.180.5.5") + " . 8080", tf.ip("10.180.5.6") + " . 65535"}
				if got := kernelChainEndpoints(t, nft, tf, svcChain(tf, svcs[1])); !slices.Equal(got, want) {
					t.Errorf("svc2's endpoints in the kernel: got %v, want %v", got, want)
				}

				// A changed endpoint count still goes through nft, and a later
				// move over netlink lands in the rewritten rule's slots.
				svcs[1].eps = svcs[1].eps[:1]
				step("endpoint removed", func() syncInput { return syncInput{services: models(tf.ip, svcs[1])} })
				svcs[1].eps = []tep{{ip: "10.180.5.7", port: 80}}
				step("endpoint moved after", func() syncInput { return syncInput{services: models(tf.ip, svcs[1])} })
				if got, want := counting.runs.Load()-runs, int32(1); got != want {
					t.Errorf("%d nft transactions for the count change and the move, want %d", got, want)
				}
			})
		})
	}
}

// BenchmarkNetlinkSlotReplace times one endpoint replacement over netlink
// (a delete and an add of one endpoint map element) in a private netns.
func BenchmarkNetlinkSlotReplace(b *testing.B) {
	tf := families[0]
	inNetns(b, func() {
		ctx := context.Background()
		s, _ := realSyncer(b, tf, nil)
		if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
			b.Fatal(err)
		}
		w := newNetlinkElements(tf.family)
		defer w.close()
		name := endpointMapName(s.view.epGen, s.view.epSlots.have[svcChain(tf, testServices[0])].mapIndex)
		base := s.view.epSlots.have[svcChain(tf, testServices[0])].base
		i := 0
		for b.Loop() {
			values := []string{"10.200.0." + itoa(i%250+1) + " . 80"}
			i++
			pl := &plan{}
			pl.deleteSlots(name, base, 0, 1)
			pl.addSlots(name, base, values, 0, 1)
			if err := w.writeElements(ctx, pl.ops); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEachGroupCutsByKind: consecutive element units form one group up to
// maxNetlinkElements, nft units up to maxOps, and a change of kind always
// starts a new group, in plan order.
func TestEachGroupCutsByKind(t *testing.T) {
	pl := &plan{}
	slot := func(n int) {
		pl.addSlots("endpoints-0-tcp-00", 0, make([]string, n), 0, n)
		pl.endUnit()
	}
	rule := func() {
		pl.add(&knftables.Rule{Chain: "c", Rule: "drop"})
		pl.endUnit()
	}
	rule()
	rule()
	slot(3)
	slot(maxNetlinkElements - 3) // fills the batch
	slot(1)                      // starts the next one
	rule()
	slot(maxNetlinkElements + 1) // too big for a batch: an nft unit
	rule()
	var got []string
	err := pl.eachGroup(0, elementUnit, func(ops []op, elements bool) error {
		kind := "nft"
		if elements {
			kind = "elements"
		}
		got = append(got, kind+":"+itoa(len(ops)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"nft:2", "elements:2", "elements:1", "nft:3"}
	if !slices.Equal(got, want) {
		t.Errorf("groups %v, want %v", got, want)
	}
	for i, o := range pl.ops {
		if o.obj != nil {
			t.Errorf("op %d was not released after its group ran", i)
		}
	}
}

// failCountingElements counts the failed writes of an elementWriter.
type failCountingElements struct {
	elementWriter
	failures int
}

func (f *failCountingElements) writeElements(ctx context.Context, ops []op) error {
	err := f.elementWriter.writeElements(ctx, ops)
	if err != nil {
		f.failures++
	}
	return err
}

// TestKernelLargeBatches writes large element batches to the kernel, which
// must take each of them whole (a failed batch is redone through nft, so
// only counting failures shows it). A full sync of 4000 Services sends
// 4000 cluster-ips and 4000 service-ips elements in a row: one message each
// would overflow a netlink attribute's 16-bit length (it did, and the
// kernel refused the batch with ENOENT), and with the long chain names of
// their verdicts a batch of 2000 is larger than the default send buffer;
// the slots of a Service with 1500 endpoints alone outgrow a message. Then the
// endpoints of 2450 Services move in one element-only plan, as large as one
// batch may be (9800 operations): a message per run of one set, each
// acknowledged by the kernel while the batch is committed, and those
// acknowledgements must fit the socket's receive queue (the default one
// overflowed, ENOBUFS after the kernel had committed, and the retry through
// nft then failed on deletions already done).
func TestKernelLargeBatches(t *testing.T) {
	tf := families[0]
	inNetns(t, func() {
		ctx := context.Background()
		s, nft := realSyncer(t, tf, nil)
		counting := &runCountingNFT{Interface: nft}
		s.nft = counting
		writer := &failCountingElements{elementWriter: s.elements}
		s.elements = writer
		const n, moved = 4000, 2450
		svcs := make([]tsvc, n)
		for i := range svcs {
			// Long names, as Kubernetes allows (63 characters each): the
			// dispatch elements' verdicts carry their chains' names.
			svcs[i] = tsvc{ns: strings.Repeat("n", 60), name: strings.Repeat("s", 58) + itoa(1000+i), portName: "p80", port: 80, nodePort: 30000 + i,
				clusterIP: "172.30." + itoa(i/200) + "." + itoa(i%200+1),
				eps:       []tep{{ip: "10.181." + itoa(i/200) + "." + itoa(i%200+1), port: 80, local: true}}}
		}
		// And one Service with 1500 endpoints: its slots alone outgrow a
		// message.
		big := tsvc{ns: "ns", name: "big", portName: "p80", port: 80, clusterIP: "172.30.99.1"}
		for j := range 1500 {
			big.eps = append(big.eps, tep{ip: "10.183." + itoa(j/200) + "." + itoa(j%200+1), port: 8080})
		}
		if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, append(slices.Clone(svcs), big)...)}); err != nil {
			t.Fatalf("full sync: %v", err)
		}
		if writer.failures != 0 {
			t.Errorf("full sync: %d element batches failed", writer.failures)
		}
		runs := counting.runs.Load()
		for i := range moved {
			svcs[i].eps = []tep{{ip: "10.182." + itoa(i/200) + "." + itoa(i%200+1), port: 80, local: true}}
		}
		res, err := s.sync(ctx, syncInput{services: models(tf.ip, svcs[:moved]...)})
		if err != nil {
			t.Fatalf("moving %d Services' endpoints: %v", moved, err)
		}
		if writer.failures != 0 || counting.runs.Load() != runs {
			t.Errorf("the moves were not one netlink batch: %d element batches failed, %d nft transactions (%+v)",
				writer.failures, counting.runs.Load()-runs, res)
		}
		want := []string{"10.182." + itoa((moved-1)/200) + "." + itoa((moved-1)%200+1) + " . 80"}
		if got := kernelChainEndpoints(t, nft, tf, svcChain(tf, svcs[moved-1])); !slices.Equal(got, want) {
			t.Errorf("the last moved Service's endpoints in the kernel: got %v, want %v", got, want)
		}
		for _, c := range []struct {
			kind, name string
			want       int
		}{{"set", clusterIPsSet, n + 1}, {"map", serviceIPsMap, n + 1}, {"map", serviceNodePortsMap, n}, {"set", hairpinConnectionsSet, n}} {
			elems, err := nft.ListElements(ctx, c.kind, c.name)
			if err != nil {
				t.Fatal(err)
			}
			if len(elems) != c.want {
				t.Errorf("%s holds %d elements, want %d", c.name, len(elems), c.want)
			}
		}
		if got := kernelChainEndpoints(t, nft, tf, svcChain(tf, big)); len(got) != 1500 || !slices.Contains(got, "10.183.7.100 . 8080") {
			t.Errorf("the big Service has %d endpoints in the kernel, want 1500 up to 10.183.7.100", len(got))
		}
	})
}
