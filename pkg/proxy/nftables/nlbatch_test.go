//go:build linux

package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	gnftables "github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
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
