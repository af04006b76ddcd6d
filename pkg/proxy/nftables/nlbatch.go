//go:build linux

package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

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
