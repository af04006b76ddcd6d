//go:build linux

package nftables

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// Endpoint changes over netlink.
//
// The commonest sync by far is "one endpoint of one Service moved": with
// endpoint maps (slots.go) its plan is a delete and an add of one map element
// (and of a hairpin-connections element when the endpoint is local).
// Sent through the nft binary, that costs what nft does before it applies
// anything: nft 1.0.6 lists every chain of the ruleset into its cache, which
// grows with the table (a one-endpoint change took ~40 ms at 10k Services,
// 139 ms at 25k and 315 ms at 50k on this project's bench machine), while
// the kernel's own work for a few data elements is microseconds. So a plan made only of such elements goes
// to the kernel as one netlink batch (atomic, like an nft transaction);
// everything else, and any plan the writer refuses or fails, goes through nft.
//
// maxNetlinkElements bounds the elements sent in one batch, and so the
// messages (at most one per element) whose acknowledgements wait in the
// receive queue (ackQueueBytes) and the bytes of the one sendmsg (about 250
// per element at most: key, value, a verdict's chain name, attribute
// headers). A larger element-only partial plan (many Services' endpoints at
// once) goes through nft, which chunks it; a full sync cuts its elements
// into such batches. Fewer, larger batches are faster: at 10k Services,
// batches of 10000 instead of 2000 elements took the cold full sync from
// 1954 to 1763 ms (medians of 5 alternating runs of test/bench).
const maxNetlinkElements = 10000

// elementWriter applies plans made only of data element changes (see
// elementsOnly) without the nft binary.
type elementWriter interface {
	// writeElements applies ops, in order, atomically: all or nothing.
	writeElements(ctx context.Context, ops []op) error
}

// elementsOnly reports whether every operation of the plan adds or deletes
// elements an elementWriter can write (see writable). Endpoint map
// slots and hairpin-connections elements change with endpoints, so the
// commonest partial plan is made only of them.
func (pl *plan) elementsOnly() bool {
	return len(pl.ops) > 0 && allElements(pl.ops)
}

// allElements reports whether an elementWriter can apply every one of ops.
func allElements(ops []op) bool {
	for _, o := range ops {
		if o.verb == opFlush {
			return false
		}
		switch obj := o.obj.(type) {
		case *slotBatch:
		case *elemOp:
			if !writable(obj) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// writable reports whether an elementWriter encodes e: an element of
// hairpin-connections or of the dispatch sets and maps every Service has an
// element in (cluster-ips, service-ips, service-nodeports; keyFields),
// without a comment. Together with the slots they are ~90% of a full sync's
// statements. The rarer sets and maps (LoadBalancer firewalls, Services
// without endpoints) stay with nft.
func writable(e *elemOp) bool {
	_, ok := keyFields[containerNames[e.c]]
	return ok && e.comment == nil
}

// containerOrder is the order in which a plan adds elements: the
// containers' own. With element batches over netlink it is
// netlinkContainerOrder, the containers a writer carries (keyFields) first,
// so that their elements form one run of element units.
var containerOrder, netlinkContainerOrder = containerOrders()

func containerOrders() (own, netlinkFirst [numContainers]container) {
	var first, rest []container
	for c := range numContainers {
		own[c] = c
		if _, ok := keyFields[containerNames[c]]; ok {
			first = append(first, c)
		} else {
			rest = append(rest, c)
		}
	}
	copy(netlinkFirst[:], append(first, rest...))
	return own, netlinkFirst
}

// elementUnit says which units of a plan cut into several transactions go
// over netlink: those an elementWriter can apply, up to a batch in size. A
// full sync at 1k Services holds ~11k endpoint and hairpin elements; one nft
// command each, they were 60% of nft's time for that sync (measured: 380 ms
// for the whole transaction, 155 ms without them), while the kernel takes
// them in a few large messages. The view creates the endpoint maps before
// the slots (view.netlinkOrder), so the slots are one run of element units,
// and the dispatch elements, which come after every chain, another.
func elementUnit(ops []op, size int) bool {
	return size <= maxNetlinkElements && allElements(ops)
}

// netlinkElements writes elements of the kube-proxy table of one family in
// netfilter batches it encodes itself (nlbatch.go).
type netlinkElements struct {
	ipv6 bool
	// sock is opened by the first write, in the network namespace of the
	// calling thread (where nft would have been started), and kept. Closing
	// a netfilter netlink socket waits for the kernel to free what earlier
	// commits deleted (an RCU grace period): 6-15 ms per close measured
	// with strace here, most of an endpoint change's cost when paid per
	// write (12.7 ms per write against ~0.1 ms for the batch itself). It is
	// closed and reopened after any failure, so that answers left unread by
	// a failed batch never answer a later one.
	sock *nlSocket
	// enc's buffer is kept between writes: a full sync writes its elements
	// in batches of up to maxNetlinkElements, and each would otherwise
	// allocate its own (~1-2.5 MB).
	enc batchEncoder
	// set and add are those of enc's open message.
	set string
	add bool
}

func newNetlinkElements(family v1.IPFamily) *netlinkElements {
	if family == v1.IPv6Protocol {
		return &netlinkElements{ipv6: true, enc: batchEncoder{family: unix.NFPROTO_IPV6, seq: 1}}
	}
	return &netlinkElements{enc: batchEncoder{family: unix.NFPROTO_IPV4, seq: 1}}
}

func (w *netlinkElements) writeElements(_ context.Context, ops []op) error {
	// Encoded first: an element that cannot be encoded fails the write
	// before anything is sent.
	if err := w.encode(ops); err != nil {
		return fmt.Errorf("netlink element write: %w", err)
	}
	if w.sock == nil {
		sock, err := openNLSocket()
		if err != nil {
			return err
		}
		w.sock = sock
	}
	if err := w.sock.exchange(&w.enc); err != nil {
		w.close()
		return fmt.Errorf("netlink batch of %d element operations: %w", len(ops), err)
	}
	return nil
}

// ackQueueBytes is the receive queue a writer's socket asks for. The kernel
// commits a batch while it is being sent, queueing an acknowledgement for
// every message of it (one per run of elements of one set: moving the
// endpoints of 450 Services at once is ~900 messages), and they are read
// only after. With the default queue (net.core.rmem_default, 208 KiB) a
// batch of 402 messages overflowed it and one of 202 did not, with or
// without NETLINK_CAP_ACK (so an acknowledgement costs the queue ~0.5-1 KiB,
// the socket buffer's overhead rather than its data): the kernel then drops
// acknowledgements of a batch it has committed, the write fails with ENOBUFS
// and is retried through nft, whose deletions of elements already gone fail
// the sync. A batch holds at most maxNetlinkElements messages; 20 MiB holds
// twice their acknowledgements, and is charged only while they wait to be
// read. The send buffer is as large: a batch is sent in one sendmsg, which
// the kernel refuses (EMSGSIZE) beyond it (net.core.wmem_default, 208 KiB),
// and 2000 service-ips elements whose verdicts name chains of long Service
// names (~210 bytes each) are twice that; a batch can be 2.5 MB.
const ackQueueBytes = 20 << 20

// close closes the socket; the next write opens a new one.
func (w *netlinkElements) close() {
	if w.sock != nil {
		w.sock.close()
		w.sock = nil
	}
}

// encode encodes ops as one batch in w.enc. Consecutive operations of the
// same kind on the same set or map share one message: a full sync writes
// one batch per chain, and the kernel looks a set up by name (a walk of the
// table's set list) once per message.
func (w *netlinkElements) encode(ops []op) error {
	e := &w.enc
	e.reset(e.seq)
	if need := batchBytes(ops); cap(e.buf) < need {
		// Sized once for the largest batch, not grown by copies.
		e.buf = append(make([]byte, 0, need), e.buf...)
	}
	for _, o := range ops {
		add := o.verb == opAdd
		switch obj := o.obj.(type) {
		case *slotBatch:
			// Element by element: one Service's slots alone (a Service
			// with thousands of endpoints) can outgrow a message.
			for i := obj.from; i < obj.to; i++ {
				w.room(obj.name, add)
				key := e.beginElement()
				e.buf = appendSlotKey(e.buf, obj.base+uint32(i))
				e.endKey(key)
				if add {
					v := e.beginValue()
					var err error
					if e.buf, err = appendSlotValue(e.buf, obj.values[i], w.ipv6); err != nil {
						return fmt.Errorf("map %s slot %d: %w", obj.name, obj.base+uint32(i), err)
					}
					e.endValue(v)
				}
				e.endElement()
			}
		case *elemOp:
			name := containerNames[obj.c]
			w.room(name, add)
			key := e.beginElement()
			var err error
			if e.buf, err = appendKey(e.buf, name, obj.key, w.ipv6); err != nil {
				return err
			}
			e.endKey(key)
			if add && !obj.c.isSet() {
				// The dispatch maps' values are "goto <chain>" (or "jump <chain>").
				code, chain, err := parseVerdict(obj.value)
				if err != nil {
					return fmt.Errorf("%s element %q: %w", name, obj.key, err)
				}
				e.verdict(code, chain)
			}
			e.endElement()
		default:
			return fmt.Errorf("%T is not an element this writer handles", o.obj)
		}
	}
	return nil
}

// batchBytes is about what encoding ops takes, a little more than less: per
// element its attributes and key (~60 bytes), its value or its verdict's
// chain name, and per message its header and names.
func batchBytes(ops []op) int {
	n := 4096
	for _, o := range ops {
		switch obj := o.obj.(type) {
		case *slotBatch:
			n += (obj.to - obj.from) * 80
		case *elemOp:
			n += 96 + len(obj.value)
		}
	}
	return n + n/maxMessageBytes*128
}

// room opens a new message for the next element unless the open one is of
// the same set and kind and has room for it.
func (w *netlinkElements) room(set string, add bool) {
	e := &w.enc
	if e.msgStart >= 0 && set == w.set && add == w.add && e.elementsBytes()+maxElementBytes <= maxMessageBytes {
		return
	}
	e.endMessage()
	e.beginMessage(add, set)
	w.set, w.add = set, add
}

// maxMessageBytes bounds the elements of one message: they are one netlink
// attribute, whose length is 16 bits. 1000 service-ips elements (~90 bytes
// each with the chain name of their verdict) overflowed it, and the kernel
// refused the whole batch with ENOENT.
const maxMessageBytes = 32 << 10

// maxElementBytes is more than one element takes in a message: a hairpin
// key of two IPv6 addresses (40 bytes), or a verdict naming a chain (at most
// 256 bytes), and the attribute headers around them.
const maxElementBytes = 512

// appendSlotKey appends a slot number as the map key "numgen random mod N"
// yields: numgen writes a 32-bit register in host byte order, and nft
// declares its key type as a host-endian integer.
func appendSlotKey(out []byte, slot uint32) []byte {
	return binary.NativeEndian.AppendUint32(out, slot)
}

// appendSlotValue appends an endpoint map's "ip . port" value.
func appendSlotValue(out []byte, value string, ipv6 bool) ([]byte, error) {
	addr, port, ok := strings.Cut(value, " . ")
	if !ok {
		return out, fmt.Errorf("value %q is not \"ip . port\"", value)
	}
	out, err := appendAddr(out, addr, ipv6)
	if err == nil {
		out, err = appendPort(out, port)
	}
	return out, err
}

// parseVerdict parses a dispatch map's value, "goto <chain>" or
// "jump <chain>".
func parseVerdict(value string) (int32, string, error) {
	verb, chain, _ := strings.Cut(value, " ")
	code, ok := map[string]int32{"goto": verdictGoto, "jump": verdictJump}[verb]
	if !ok || chain == "" || strings.ContainsAny(chain, " ") {
		return 0, "", fmt.Errorf("value %q is not a goto or jump to a chain", value)
	}
	return code, chain, nil
}

// The kernel stores a concatenation ("ip daddr . tcp dport", or the
// hairpin set's "addr . addr . inet_proto . inet_service") field by field,
// each in network byte order and padded to a multiple of 4 bytes: an
// address takes 4 or 16 bytes, a port 2 and 2 of padding, a protocol 1 and 3.

// appendAddr appends an address of the table's family.
func appendAddr(out []byte, text string, ipv6 bool) ([]byte, error) {
	addr, err := netip.ParseAddr(text)
	switch {
	case err != nil:
		return out, fmt.Errorf("bad address %q: %w", text, err)
	case ipv6 && addr.Is6() && !addr.Is4In6():
		a := addr.As16()
		return append(out, a[:]...), nil
	case !ipv6 && addr.Is4():
		a := addr.As4()
		return append(out, a[:]...), nil
	}
	return out, fmt.Errorf("address %q is not of the table's family", text)
}

// appendPort appends a port and its padding.
func appendPort(out []byte, text string) ([]byte, error) {
	port, err := strconv.ParseUint(text, 10, 16)
	if err != nil {
		return out, fmt.Errorf("bad port %q: %w", text, err)
	}
	return append(binary.BigEndian.AppendUint16(out, uint16(port)), 0, 0), nil
}

// protocolNumbers are the inet_proto values of the protocols a Service has.
var protocolNumbers = map[string]byte{"tcp": 6, "udp": 17, "sctp": 132}

// appendProto appends a protocol and its padding.
func appendProto(out []byte, text string) ([]byte, error) {
	proto, ok := protocolNumbers[text]
	if !ok {
		return out, fmt.Errorf("unknown protocol %q", text)
	}
	return append(out, proto, 0, 0, 0), nil
}

// keyFields are the field types of each writable set's and map's key
// (generator.go, syncer.go): 'a' an address, 'p' a protocol, 'n' a port.
var keyFields = map[string]string{
	hairpinConnectionsSet: "aapn",
	clusterIPsSet:         "a",
	serviceIPsMap:         "apn",
	serviceNodePortsMap:   "pn",
}

// appendKey appends the key of an element of set (a writable one), given as
// nft writes it ("172.30.0.41 . tcp . 80").
func appendKey(out []byte, set, key string, ipv6 bool) ([]byte, error) {
	fields := keyFields[set]
	rest := key
	for i, f := range []byte(fields) {
		field, more, found := strings.Cut(rest, " . ")
		if found != (i < len(fields)-1) {
			return out, fmt.Errorf("%s element %q does not have %d fields", set, key, len(fields))
		}
		rest = more
		var err error
		switch f {
		case 'a':
			out, err = appendAddr(out, field, ipv6)
		case 'p':
			out, err = appendProto(out, field)
		case 'n':
			out, err = appendPort(out, field)
		}
		if err != nil {
			return out, fmt.Errorf("%s element %q: %w", set, key, err)
		}
	}
	return out, nil
}
