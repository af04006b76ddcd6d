//go:build linux

package nftables

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	gnftables "github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"
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

// netlinkElements writes elements of the kube-proxy table of one family
// with github.com/google/nftables.
type netlinkElements struct {
	family gnftables.TableFamily
	ipv6   bool
	// conn is opened by the first write, in the network namespace of the
	// calling thread (where nft would have been started), and kept. Closing
	// a netfilter netlink socket waits for the kernel to free what earlier
	// commits deleted (an RCU grace period): 6-15 ms per close measured
	// with strace here, most of an endpoint change's cost when paid per
	// write (12.7 ms per write against ~0.1 ms for the batch itself). It is
	// closed and reopened after any failure, so that acknowledgements left
	// unread by a failed batch never answer a later one.
	conn *gnftables.Conn
}

func newNetlinkElements(family v1.IPFamily) *netlinkElements {
	if family == v1.IPv6Protocol {
		return &netlinkElements{family: gnftables.TableFamilyIPv6, ipv6: true}
	}
	return &netlinkElements{family: gnftables.TableFamilyIPv4}
}

func (w *netlinkElements) writeElements(_ context.Context, ops []op) error {
	if w.conn == nil {
		conn, err := gnftables.New(gnftables.AsLasting(), gnftables.WithSockOptions(sizeQueues))
		if err != nil {
			return fmt.Errorf("opening an nftables netlink connection: %w", err)
		}
		w.conn = conn
	}
	if err := w.batch(w.conn, ops); err != nil {
		w.close()
		return err
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
// read. NETLINK_CAP_ACK keeps a large message from being copied back whole.
const ackQueueBytes = 20 << 20

// sizeQueues prepares a writer's socket for large batches: acknowledgements
// without a copy of the request, a receive queue of ackQueueBytes, and a
// send buffer of as much. A batch is sent in one sendmsg, which the kernel
// refuses (EMSGSIZE) beyond the send buffer (net.core.wmem_default, 208
// KiB): 2000 service-ips elements whose verdicts name chains of long
// Service names (~210 bytes each) are twice that, and a batch can be 2.5 MB. Both are set past
// net.core.{r,w}mem_max where the process may (CAP_NET_ADMIN, as
// kube-proxy has), else as large as those allow.
func sizeQueues(c *netlink.Conn) error {
	if err := c.SetOption(netlink.CapAcknowledge, true); err != nil {
		return fmt.Errorf("NETLINK_CAP_ACK: %w", err)
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	var rcvErr, sndErr error
	if err := raw.Control(func(fd uintptr) {
		rcvErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, ackQueueBytes)
		sndErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, ackQueueBytes)
	}); err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	if rcvErr != nil {
		if err := c.SetReadBuffer(ackQueueBytes); err != nil {
			return fmt.Errorf("netlink receive queue of %d bytes: %w", ackQueueBytes, err)
		}
	}
	if sndErr != nil {
		if err := c.SetWriteBuffer(ackQueueBytes); err != nil {
			return fmt.Errorf("netlink send buffer of %d bytes: %w", ackQueueBytes, err)
		}
	}
	return nil
}

// close closes the connection; the next write opens a new one.
func (w *netlinkElements) close() {
	if w.conn != nil {
		_ = w.conn.CloseLasting()
		w.conn = nil
	}
}

// batch queues ops on conn and sends them as one batch. Consecutive
// operations of the same kind on the same set or map share one message: a
// full sync writes one batch per chain, and the kernel looks a set up by
// name (a walk of the table's set list) once per message.
func (w *netlinkElements) batch(conn *gnftables.Conn, ops []op) error {
	table := &gnftables.Table{Name: kubeProxyTable, Family: w.family}
	var set *gnftables.Set
	var verb opVerb
	var elems []gnftables.SetElement
	msgBytes := 0
	send := func() error {
		if len(elems) == 0 {
			return nil
		}
		var err error
		if verb == opAdd {
			err = conn.SetAddElements(set, elems)
		} else {
			err = conn.SetDeleteElements(set, elems)
		}
		elems, msgBytes = nil, 0
		if err != nil {
			return fmt.Errorf("netlink element write to %s: %w", set.Name, err)
		}
		return nil
	}
	for _, o := range ops {
		name, isMap, err := "", false, error(nil)
		var more []gnftables.SetElement
		switch obj := o.obj.(type) {
		case *slotBatch:
			name, isMap = obj.name, true
			more, err = w.slotElements(obj, o.verb == opAdd)
		case *elemOp:
			el := obj.element()
			name, isMap = el.Set+el.Map, el.Map != ""
			var e gnftables.SetElement
			e, err = w.encodeElement(el, o.verb == opAdd)
			more = []gnftables.SetElement{e}
		default:
			err = fmt.Errorf("%T is not an element this writer handles", o.obj)
		}
		if err != nil {
			return fmt.Errorf("netlink element write: %w", err)
		}
		if set == nil || set.Name != name || verb != o.verb {
			if err := send(); err != nil {
				return err
			}
			set, verb = &gnftables.Set{Table: table, Name: name, IsMap: isMap}, o.verb
		}
		// Element by element: one Service's slots alone (a Service
		// with thousands of endpoints) can outgrow a message.
		for _, e := range more {
			size := elementBytes(e)
			if msgBytes+size > maxMessageBytes {
				if err := send(); err != nil {
					return err
				}
			}
			elems = append(elems, e)
			msgBytes += size
		}
	}
	if err := send(); err != nil {
		return err
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("netlink batch of %d element operations: %w", len(ops), err)
	}
	return nil
}

// maxMessageBytes bounds the elements of one message: they are one netlink
// attribute, whose length is 16 bits. 1000 service-ips elements (~90 bytes
// each with the chain name of their verdict) overflowed it, and the kernel
// refused the whole batch with ENOENT.
const maxMessageBytes = 32 << 10

// elementBytes is about what e takes in a message: its key and value, a
// verdict's chain name, and the attribute headers around them.
func elementBytes(e gnftables.SetElement) int {
	n := 48 + len(e.Key) + len(e.Val)
	if e.VerdictData != nil {
		n += len(e.VerdictData.Chain)
	}
	return n
}

// slotElements encodes a batch's slots, with their values when adding.
func (w *netlinkElements) slotElements(b *slotBatch, withValues bool) ([]gnftables.SetElement, error) {
	elems := make([]gnftables.SetElement, 0, b.to-b.from)
	for i := b.from; i < b.to; i++ {
		e := gnftables.SetElement{Key: slotKey(b.base + uint32(i))}
		if withValues {
			addr, port, ok := strings.Cut(b.values[i], " . ")
			if !ok {
				return nil, fmt.Errorf("map %s slot %d: value %q is not \"ip . port\"", b.name, b.base+uint32(i), b.values[i])
			}
			var err error
			if e.Val, err = appendAddr(nil, addr, w.ipv6); err == nil {
				e.Val, err = appendPort(e.Val, port)
			}
			if err != nil {
				return nil, fmt.Errorf("map %s slot %d: %w", b.name, b.base+uint32(i), err)
			}
		}
		elems = append(elems, e)
	}
	return elems, nil
}

// slotKey encodes a slot number as the map key "numgen random mod N" yields:
// numgen writes a 32-bit register in host byte order, and nft declares its
// key type as a host-endian integer.
func slotKey(slot uint32) []byte {
	return binary.NativeEndian.AppendUint32(nil, slot)
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
		return nil, fmt.Errorf("bad address %q: %w", text, err)
	case ipv6 && addr.Is6() && !addr.Is4In6():
		a := addr.As16()
		return append(out, a[:]...), nil
	case !ipv6 && addr.Is4():
		a := addr.As4()
		return append(out, a[:]...), nil
	}
	return nil, fmt.Errorf("address %q is not of the table's family", text)
}

// appendPort appends a port and its padding.
func appendPort(out []byte, text string) ([]byte, error) {
	port, err := strconv.ParseUint(text, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port %q: %w", text, err)
	}
	return append(binary.BigEndian.AppendUint16(out, uint16(port)), 0, 0), nil
}

// protocolNumbers are the inet_proto values of the protocols a Service has.
var protocolNumbers = map[string]byte{"tcp": 6, "udp": 17, "sctp": 132}

// appendProto appends a protocol and its padding.
func appendProto(out []byte, text string) ([]byte, error) {
	proto, ok := protocolNumbers[text]
	if !ok {
		return nil, fmt.Errorf("unknown protocol %q", text)
	}
	return append(out, proto, 0, 0, 0), nil
}

// keyFields are the field types of each writable set's and map's key
// (servicerules.go, syncer.go): 'a' an address, 'p' a protocol, 'n' a port.
var keyFields = map[string]string{
	hairpinConnectionsSet: "aapn",
	clusterIPsSet:         "a",
	serviceIPsMap:         "apn",
	serviceNodePortsMap:   "pn",
}

// encodeElement encodes a writable element (writable); the value,
// a verdict, only when adding.
func (w *netlinkElements) encodeElement(e *knftables.Element, withValue bool) (gnftables.SetElement, error) {
	name := e.Set + e.Map
	fields := keyFields[name]
	if len(e.Key) != len(fields) {
		return gnftables.SetElement{}, fmt.Errorf("%s element %q does not have %d fields", name, strings.Join(e.Key, " . "), len(fields))
	}
	var key []byte
	var err error
	for i, f := range []byte(fields) {
		switch f {
		case 'a':
			key, err = appendAddr(key, e.Key[i], w.ipv6)
		case 'p':
			key, err = appendProto(key, e.Key[i])
		case 'n':
			key, err = appendPort(key, e.Key[i])
		}
		if err != nil {
			return gnftables.SetElement{}, fmt.Errorf("%s element %q: %w", name, strings.Join(e.Key, " . "), err)
		}
	}
	out := gnftables.SetElement{Key: key}
	if e.Map == "" || !withValue {
		return out, nil
	}
	// The dispatch maps' values are "goto <chain>" (or "jump <chain>").
	verb, chain, _ := strings.Cut(strings.Join(e.Value, " . "), " ")
	kind, ok := map[string]expr.VerdictKind{"goto": expr.VerdictGoto, "jump": expr.VerdictJump}[verb]
	if !ok || chain == "" || strings.ContainsAny(chain, " ") {
		return gnftables.SetElement{}, fmt.Errorf("%s element %q: value %q is not a goto or jump to a chain", name, strings.Join(e.Key, " . "), strings.Join(e.Value, " . "))
	}
	out.VerdictData = &expr.Verdict{Kind: kind, Chain: chain}
	return out, nil
}
