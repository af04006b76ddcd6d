//go:build linux

package nftables

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

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
// the kernel's own work for a few data elements is microseconds. So a plan
// made only of such elements goes to the kernel as one netlink batch (atomic,
// like an nft transaction); everything else, and any plan the writer refuses
// or fails, goes through nft. Which plans and units qualify is decided in
// plan.go (elementsOnly, elementUnit).
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

// netlinkElements writes elements of the kube-proxy table of one family in
// netfilter batches it encodes itself (batchEncoder, below).
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
// (generator.go, fixed.go): 'a' an address, 'p' a protocol, 'n' a port.
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

// Netfilter netlink batches of set element changes, encoded by hand.
//
// A full sync at 10k Services sends ~124k elements over netlink. Encoded
// through github.com/google/nftables, every element became a SetElement, a
// few netlink.Attribute slices and their marshalled copies, and every
// message was copied again into the batch: ~62 MB allocated after the
// sync's forced collection (heap profile of test/bench), about as much as
// everything the process then held live (~91 MB), so the Go heap grew to
// twice that before the next collection, and the peak RSS with it. Here a
// batch is appended into one buffer kept between batches, and sent as is.
//
// The wire format (include/uapi/linux/netfilter/nf_tables.h):
//
//	BATCH_BEGIN
//	NEWSETELEM or DELSETELEM, per run of elements of one set:
//	  NFTA_SET_ELEM_LIST_TABLE  "kube-proxy"
//	  NFTA_SET_ELEM_LIST_SET    set or map name
//	  NFTA_SET_ELEM_LIST_ELEMENTS (nested), per element NFTA_LIST_ELEM (nested):
//	    NFTA_SET_ELEM_KEY (nested)   NFTA_DATA_VALUE key bytes
//	    NFTA_SET_ELEM_DATA (nested)  NFTA_DATA_VALUE value bytes, or
//	                                 NFTA_DATA_VERDICT (nested) code, chain
//	BATCH_END
//
// Each element message asks for an acknowledgement; the kernel answers every
// one once the whole batch is processed (committed, or aborted on any error),
// or answers the batch header alone when it cannot take the batch at all.

// Attribute types, from nf_tables.h (not all are in x/sys/unix).
const (
	nftaListElem           = 1 // NFTA_LIST_ELEM
	nftaSetElemKey         = 1 // NFTA_SET_ELEM_KEY
	nftaSetElemData        = 2 // NFTA_SET_ELEM_DATA
	nftaDataValue          = 1 // NFTA_DATA_VALUE
	nftaDataVerdict        = 2 // NFTA_DATA_VERDICT
	nftaVerdictCode        = 1 // NFTA_VERDICT_CODE
	nftaVerdictChain       = 2 // NFTA_VERDICT_CHAIN
	nlaNested              = unix.NLA_F_NESTED
	nfnetlinkV0            = 0
	nlmsgHeaderLen         = unix.SizeofNlMsghdr
	nfgenHeaderLen         = 4
	attrHeaderLen          = unix.SizeofNlAttr
	verdictJump      int32 = -3 // NFT_JUMP
	verdictGoto      int32 = -4 // NFT_GOTO
)

// batchEncoder appends one netfilter batch to buf. Offsets of the open
// message and attribute nests are patched with their lengths when closed,
// so nothing is encoded twice.
type batchEncoder struct {
	buf      []byte
	seq      uint32 // of the next message
	family   byte   // NFPROTO_IPV4 or NFPROTO_IPV6
	msgStart int    // offset of the open message's header, -1 if none
	listAt   int    // offset of its NFTA_SET_ELEM_LIST_ELEMENTS attribute
	elemAt   int    // offset of the open NFTA_LIST_ELEM, -1 if none
	// sets names the set of each element message, by sequence number
	// offset from the batch's first: for the error of a failed batch.
	sets []string
	// first is the batch header's sequence number.
	first uint32
}

func (e *batchEncoder) header(typ, flags uint16) {
	e.buf = binary.NativeEndian.AppendUint32(e.buf, 0) // length, patched
	e.buf = binary.NativeEndian.AppendUint16(e.buf, typ)
	e.buf = binary.NativeEndian.AppendUint16(e.buf, flags)
	e.buf = binary.NativeEndian.AppendUint32(e.buf, e.seq)
	e.buf = binary.NativeEndian.AppendUint32(e.buf, 0) // port id: the kernel's
	e.seq++
}

// nfgen appends the nfgenmsg every netfilter message starts with.
func (e *batchEncoder) nfgen(family byte, resID uint16) {
	e.buf = append(e.buf, family, nfnetlinkV0)
	e.buf = binary.BigEndian.AppendUint16(e.buf, resID)
}

func (e *batchEncoder) patchLen(at int) {
	binary.NativeEndian.PutUint32(e.buf[at:], uint32(len(e.buf)-at))
}

// reset starts a batch numbered from seq.
func (e *batchEncoder) reset(seq uint32) {
	e.buf, e.sets = e.buf[:0], e.sets[:0]
	e.seq, e.first, e.msgStart, e.elemAt = seq, seq, -1, -1
	e.header(unix.NFNL_MSG_BATCH_BEGIN, unix.NLM_F_REQUEST)
	e.nfgen(unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES)
	e.patchLen(0)
}

// beginMessage opens an element message for set.
func (e *batchEncoder) beginMessage(add bool, set string) {
	typ, flags := uint16(unix.NFT_MSG_DELSETELEM), uint16(unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	if add {
		typ, flags = unix.NFT_MSG_NEWSETELEM, unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE
	}
	e.msgStart = len(e.buf)
	e.sets = append(e.sets, set)
	e.header(unix.NFNL_SUBSYS_NFTABLES<<8|typ, flags)
	e.nfgen(e.family, 0)
	e.stringAttr(unix.NFTA_SET_ELEM_LIST_TABLE, kubeProxyTable)
	e.stringAttr(unix.NFTA_SET_ELEM_LIST_SET, set)
	e.listAt = e.openNest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
}

// endMessage closes the open message, if any.
func (e *batchEncoder) endMessage() {
	if e.msgStart < 0 {
		return
	}
	e.closeNest(e.listAt)
	e.patchLen(e.msgStart)
	e.msgStart = -1
}

// elementsBytes is the size of the open message's element list so far.
func (e *batchEncoder) elementsBytes() int {
	if e.msgStart < 0 {
		return 0
	}
	return len(e.buf) - e.listAt
}

// messages is the number of element messages begun.
func (e *batchEncoder) messages() int { return len(e.sets) }

// finish closes the batch and returns it, ready to send.
func (e *batchEncoder) finish() []byte {
	e.endMessage()
	at := len(e.buf)
	e.header(unix.NFNL_MSG_BATCH_END, unix.NLM_F_REQUEST)
	e.nfgen(unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES)
	e.patchLen(at)
	return e.buf
}

// beginElement opens an element of the open message and its key, whose
// bytes the caller appends (appendAddr, appendPort, ...) before value or
// endElement.
func (e *batchEncoder) beginElement() (keyAt int) {
	e.elemAt = e.openNest(nftaListElem)
	outer := e.openNest(nftaSetElemKey)
	e.attrHeader(nftaDataValue)
	return outer
}

// endKey closes the key opened by beginElement.
func (e *batchEncoder) endKey(keyAt int) {
	e.closeNest(keyAt + attrHeaderLen) // NFTA_DATA_VALUE
	e.closeNest(keyAt)
}

// beginValue opens a data value, whose bytes the caller appends before
// endValue.
func (e *batchEncoder) beginValue() (valueAt int) {
	at := e.openNest(nftaSetElemData)
	e.attrHeader(nftaDataValue)
	return at
}

func (e *batchEncoder) endValue(valueAt int) {
	e.closeNest(valueAt + attrHeaderLen)
	e.closeNest(valueAt)
}

// verdict appends a verdict value: a jump or goto to chain.
func (e *batchEncoder) verdict(code int32, chain string) {
	at := e.openNest(nftaSetElemData)
	v := e.openNest(nftaDataVerdict)
	c := len(e.buf)
	e.attrHeader(nftaVerdictCode)
	e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(code))
	e.closeNest(c)
	e.stringAttr(nftaVerdictChain, chain)
	e.closeNest(v)
	e.closeNest(at)
}

func (e *batchEncoder) endElement() {
	e.closeNest(e.elemAt)
	e.elemAt = -1
}

// attrHeader appends an attribute header whose length closeNest patches.
func (e *batchEncoder) attrHeader(typ uint16) {
	e.buf = binary.NativeEndian.AppendUint16(e.buf, 0)
	e.buf = binary.NativeEndian.AppendUint16(e.buf, typ)
}

func (e *batchEncoder) openNest(typ uint16) int {
	at := len(e.buf)
	e.attrHeader(typ | nlaNested)
	return at
}

// closeNest sets the length of the attribute at at (its header and payload,
// without padding) and pads the buffer to 4 bytes.
func (e *batchEncoder) closeNest(at int) {
	binary.NativeEndian.PutUint16(e.buf[at:], uint16(len(e.buf)-at))
	for len(e.buf)%4 != 0 {
		e.buf = append(e.buf, 0)
	}
}

func (e *batchEncoder) stringAttr(typ uint16, s string) {
	at := len(e.buf)
	e.attrHeader(typ)
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, 0)
	e.closeNest(at)
}

// nlSocket is a netfilter netlink socket in the network namespace of the
// thread that opened it.
type nlSocket struct {
	fd  int
	buf []byte // for acknowledgements
}

// ackTimeout bounds the wait for a batch's answers, so that a kernel that
// never answers (it should not) fails the write, which closes the socket and
// retries through nft, instead of stopping every later sync. The kernel
// answers once it has processed the whole batch, milliseconds for the
// largest (maxNetlinkElements).
const ackTimeout = 30 * time.Second

func openNLSocket() (*nlSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("netfilter netlink socket: %w", err)
	}
	s := &nlSocket{fd: fd, buf: make([]byte, 32<<10)}
	if err := s.setup(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *nlSocket) setup() error {
	if err := unix.Bind(s.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netfilter netlink socket: bind: %w", err)
	}
	// Acknowledgements without a copy of the request: a batch's are read
	// only once all are queued (see ackQueueBytes).
	if err := unix.SetsockoptInt(s.fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1); err != nil {
		return fmt.Errorf("NETLINK_CAP_ACK: %w", err)
	}
	for _, b := range []struct {
		force, plain int
		what         string
	}{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, "receive queue"}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, "send buffer"}} {
		// Past net.core.{r,w}mem_max where the process may (CAP_NET_ADMIN,
		// as kube-proxy has), else as large as those allow.
		if unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, b.force, ackQueueBytes) != nil {
			if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, b.plain, ackQueueBytes); err != nil {
				return fmt.Errorf("netlink %s of %d bytes: %w", b.what, ackQueueBytes, err)
			}
		}
	}
	tv := unix.NsecToTimeval(ackTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("netlink receive timeout: %w", err)
	}
	return nil
}

// close closes the socket. Closing waits for the kernel to free what earlier
// commits deleted (see netlinkElements.sock), so it is done only on failure.
func (s *nlSocket) close() {
	if s.fd >= 0 {
		_ = unix.Close(s.fd)
		s.fd = -1
	}
}

// exchange sends the batch e encoded and waits for the answer to each of its
// messages, returning the first error the kernel reported.
func (s *nlSocket) exchange(e *batchEncoder) error {
	batch := e.finish()
	for {
		err := unix.Sendto(s.fd, batch, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("sending a netlink batch of %d bytes: %w", len(batch), err)
		}
	}
	var first error
	for answered := 0; answered < e.messages(); {
		n, _, err := unix.Recvfrom(s.fd, s.buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// ENOBUFS: answers were dropped, so they cannot be counted.
			return fmt.Errorf("reading the answers to a netlink batch (%d of %d read): %w", answered, e.messages(), err)
		}
		for b := s.buf[:n]; len(b) >= nlmsgHeaderLen; {
			size := int(binary.NativeEndian.Uint32(b))
			if size < nlmsgHeaderLen || size > len(b) {
				return fmt.Errorf("reading the answers to a netlink batch: a message of %d bytes in %d", size, len(b))
			}
			typ, seq, data := binary.NativeEndian.Uint16(b[4:]), binary.NativeEndian.Uint32(b[8:]), b[nlmsgHeaderLen:size]
			b = b[min(len(b), (size+3)&^3):]
			if typ != unix.NLMSG_ERROR || len(data) < 4 {
				continue
			}
			code := int32(binary.NativeEndian.Uint32(data))
			if seq == e.first {
				// The kernel refused the batch as a whole; nothing else
				// will be answered.
				return fmt.Errorf("netlink batch refused: %w", unix.Errno(-code))
			}
			i := int(seq - e.first - 1)
			if i < 0 || i >= e.messages() {
				continue // not of this batch
			}
			answered++
			if code != 0 && first == nil {
				first = fmt.Errorf("netlink element message %d of %d (set %s): %w", i+1, e.messages(), e.sets[i], unix.Errno(-code))
			}
		}
	}
	return first
}
