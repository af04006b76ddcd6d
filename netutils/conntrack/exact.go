//go:build linux

/*
Copyright The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package conntrack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// maxExactDeletes is the largest batch DeleteEntries removes with per-flow requests. Each
// costs two round trips (get, then delete by id); the alternative costs a dump of the whole
// table however few flows go. Stale-flow cleanup usually deletes a handful of flows from a
// table of many thousands, where the per-flow path wins by orders of magnitude; a batch large
// enough to be a sizeable share of the table is cheaper as one dump.
const maxExactDeletes = 128

// exactDeleter deletes one flow, identified by both of its tuples.
type exactDeleter interface {
	// deleteExact deletes the entry whose original tuple is flow.Forward, but only if its
	// reply tuple is still flow.Reverse. It reports whether this call deleted it; an entry
	// that is gone or now belongs to another connection is (false, nil).
	deleteExact(ipFamily uint8, flow *netlink.ConntrackFlow) (bool, error)
}

// portProtocol reports whether conntrack identifies the protocol's flows by ports, the only
// tuples a ConntrackFlow fully describes (ICMP ids and types are not parsed by netlink).
func portProtocol(p uint8) bool {
	switch p {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_SCTP, unix.IPPROTO_DCCP, unix.IPPROTO_UDPLITE:
		return true
	}
	return false
}

// nlExact implements exactDeleter over ctnetlink.
type nlExact struct {
	// sockets is a socket bound to a namespace, or nil to open one per request in the calling
	// thread's namespace.
	sockets map[int]*nl.SocketHandle
}

func (d *nlExact) request(msg, flags int, ipFamily uint8) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest((netlink.ConntrackTable<<8)|msg, flags)
	req.Sockets = d.sockets
	req.AddData(&nl.Nfgenmsg{NfgenFamily: ipFamily, Version: nl.NFNETLINK_V0})
	return req
}

// tupleAttr encodes t as a CTA_TUPLE_ORIG or CTA_TUPLE_REPLY attribute.
func tupleAttr(kind int, ipFamily uint8, t *netlink.IPTuple) (*nl.RtAttr, error) {
	src, dst := t.SrcIP, t.DstIP
	srcType, dstType := nl.CTA_IP_V4_SRC, nl.CTA_IP_V4_DST
	if ipFamily == unix.AF_INET {
		src, dst = src.To4(), dst.To4()
	} else {
		if src.To4() != nil || dst.To4() != nil {
			src, dst = nil, nil
		} else {
			src, dst = src.To16(), dst.To16()
		}
		srcType, dstType = nl.CTA_IP_V6_SRC, nl.CTA_IP_V6_DST
	}
	if src == nil || dst == nil {
		return nil, fmt.Errorf("tuple %s -> %s does not belong to address family %d", t.SrcIP, t.DstIP, ipFamily)
	}
	attr := nl.NewRtAttr(unix.NLA_F_NESTED|kind, nil)
	ip := attr.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_IP, nil)
	ip.AddRtAttr(srcType, src)
	ip.AddRtAttr(dstType, dst)
	proto := attr.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_PROTO, nil)
	proto.AddRtAttr(nl.CTA_PROTO_NUM, []byte{t.Protocol})
	proto.AddRtAttr(nl.CTA_PROTO_SRC_PORT, nl.BEUint16Attr(t.SrcPort))
	proto.AddRtAttr(nl.CTA_PROTO_DST_PORT, nl.BEUint16Attr(t.DstPort))
	return attr, nil
}

func zoneAttr(zone uint16) *nl.RtAttr {
	return nl.NewRtAttr(nl.CTA_ZONE, nl.BEUint16Attr(zone))
}

func (d *nlExact) deleteExact(ipFamily uint8, flow *netlink.ConntrackFlow) (bool, error) {
	orig, err := tupleAttr(nl.CTA_TUPLE_ORIG, ipFamily, &flow.Forward)
	if err != nil {
		// A flow of the other family cannot be in this family's table.
		return false, nil
	}
	// The kernel flags its single answer NLM_F_MULTI, so only the ack marks its end.
	get := d.request(nl.IPCTNL_MSG_CT_GET, unix.NLM_F_ACK, ipFamily)
	get.AddData(orig)
	if flow.Zone != 0 {
		get.AddData(zoneAttr(flow.Zone))
	}
	msgs, err := get.Execute(unix.NETLINK_NETFILTER, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("looking up conntrack entry %s: %w", flowBrief(flow), err)
	}
	if len(msgs) != 1 {
		return false, fmt.Errorf("looking up conntrack entry %s: got %d replies, want 1", flowBrief(flow), len(msgs))
	}
	id, reply, err := parseIDAndReply(msgs[0])
	if err != nil {
		return false, fmt.Errorf("parsing conntrack entry %s: %w", flowBrief(flow), err)
	}
	if !sameTuple(reply, &flow.Reverse) {
		// The original tuple now belongs to a newer connection (e.g. a reused client port sent
		// to another endpoint); it is not the flow the caller asked to delete.
		return false, nil
	}
	del := d.request(nl.IPCTNL_MSG_CT_DELETE, unix.NLM_F_ACK, ipFamily)
	del.AddData(orig)
	// The id makes the kernel delete exactly the entry inspected above, even if it was
	// replaced in between.
	del.AddData(nl.NewRtAttr(nl.CTA_ID, binary.BigEndian.AppendUint32(nil, id)))
	if flow.Zone != 0 {
		del.AddData(zoneAttr(flow.Zone))
	}
	if _, err := del.Execute(unix.NETLINK_NETFILTER, 0); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("deleting conntrack entry %s: %w", flowBrief(flow), err)
	}
	return true, nil
}

func flowBrief(f *netlink.ConntrackFlow) string {
	return fmt.Sprintf("proto %d %s:%d -> %s:%d (reply from %s:%d)", f.Forward.Protocol,
		f.Forward.SrcIP, f.Forward.SrcPort, f.Forward.DstIP, f.Forward.DstPort, f.Reverse.SrcIP, f.Reverse.SrcPort)
}

// attr is one netlink attribute, its type stripped of the nested and byte-order flags.
type attr struct {
	typ   uint16
	value []byte
}

// parseAttrs splits b into attributes. It exists because nl.ParseRouteAttr panics on a last
// attribute whose padding is missing; this one returns an error for any inconsistency.
func parseAttrs(b []byte) ([]attr, error) {
	var out []attr
	for len(b) > 0 {
		if len(b) < unix.SizeofNlAttr {
			return nil, fmt.Errorf("truncated attribute header (%d bytes)", len(b))
		}
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if l < unix.SizeofNlAttr || l > len(b) {
			return nil, fmt.Errorf("attribute %d has length %d, %d bytes left", typ, l, len(b))
		}
		out = append(out, attr{typ: typ, value: b[unix.SizeofNlAttr:l]})
		b = b[min((l+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1), len(b)):]
	}
	return out, nil
}

// parseIDAndReply extracts CTA_ID and the reply tuple from a ctnetlink entry message (nfgenmsg
// header followed by attributes).
func parseIDAndReply(msg []byte) (uint32, *netlink.IPTuple, error) {
	if len(msg) < 4 {
		return 0, nil, errors.New("short message")
	}
	attrs, err := parseAttrs(msg[4:])
	if err != nil {
		return 0, nil, err
	}
	var id uint32
	var haveID bool
	var reply *netlink.IPTuple
	for _, a := range attrs {
		switch a.typ {
		case nl.CTA_ID:
			if len(a.value) < 4 {
				return 0, nil, errors.New("short CTA_ID")
			}
			id, haveID = binary.BigEndian.Uint32(a.value), true
		case nl.CTA_TUPLE_REPLY:
			if reply, err = parseTuple(a.value); err != nil {
				return 0, nil, err
			}
		}
	}
	if !haveID || reply == nil {
		return 0, nil, errors.New("entry lacks CTA_ID or CTA_TUPLE_REPLY")
	}
	return id, reply, nil
}

func parseTuple(b []byte) (*netlink.IPTuple, error) {
	attrs, err := parseAttrs(b)
	if err != nil {
		return nil, err
	}
	t := &netlink.IPTuple{}
	for _, a := range attrs {
		switch a.typ {
		case nl.CTA_TUPLE_IP:
			ips, err := parseAttrs(a.value)
			if err != nil {
				return nil, err
			}
			for _, ip := range ips {
				switch ip.typ {
				case nl.CTA_IP_V4_SRC, nl.CTA_IP_V6_SRC:
					t.SrcIP = net.IP(bytes.Clone(ip.value))
				case nl.CTA_IP_V4_DST, nl.CTA_IP_V6_DST:
					t.DstIP = net.IP(bytes.Clone(ip.value))
				}
			}
		case nl.CTA_TUPLE_PROTO:
			ps, err := parseAttrs(a.value)
			if err != nil {
				return nil, err
			}
			for _, p := range ps {
				switch p.typ {
				case nl.CTA_PROTO_NUM:
					if len(p.value) >= 1 {
						t.Protocol = p.value[0]
					}
				case nl.CTA_PROTO_SRC_PORT:
					if len(p.value) >= 2 {
						t.SrcPort = binary.BigEndian.Uint16(p.value)
					}
				case nl.CTA_PROTO_DST_PORT:
					if len(p.value) >= 2 {
						t.DstPort = binary.BigEndian.Uint16(p.value)
					}
				}
			}
		}
	}
	return t, nil
}

func sameTuple(a, b *netlink.IPTuple) bool {
	return a.Protocol == b.Protocol && a.SrcPort == b.SrcPort && a.DstPort == b.DstPort &&
		addr(a.SrcIP) == addr(b.SrcIP) && addr(a.DstIP) == addr(b.DstIP)
}
