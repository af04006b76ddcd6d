package nfacct

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Kernel ABI constants from include/uapi/linux/netfilter/nfnetlink_acct.h.
const (
	cmdNew = 0 // NFNL_MSG_ACCT_NEW
	cmdGet = 1 // NFNL_MSG_ACCT_GET

	attrName    = 1 // NFACCT_NAME, NUL-terminated string
	attrPackets = 2 // NFACCT_PKTS, big-endian u64
	attrBytes   = 3 // NFACCT_BYTES, big-endian u64

	nfgenmsgLen = 4 // struct nfgenmsg precedes the attributes
	nlaHdrLen   = 4 // struct nlattr: u16 len, u16 type
	// nlaTypeMask strips NLA_F_NESTED / NLA_F_NET_BYTEORDER from the type.
	nlaTypeMask = 0x3fff
)

var errMalformed = errors.New("malformed nfacct message")

// decode parses one NFNL_MSG_ACCT_* payload (without its nlmsghdr). It never
// panics on hostile input: every length is checked against what is left.
// Name, packets and bytes are all required; other attributes are skipped.
func decode(msg []byte) (*Counter, error) {
	if len(msg) < nfgenmsgLen {
		return nil, fmt.Errorf("%w: %d bytes, shorter than nfgenmsg", errMalformed, len(msg))
	}
	b := msg[nfgenmsgLen:]
	c := &Counter{}
	var seen uint8
	for len(b) > 0 {
		if len(b) < nlaHdrLen {
			return nil, fmt.Errorf("%w: %d trailing bytes", errMalformed, len(b))
		}
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) & nlaTypeMask
		if l < nlaHdrLen || l > len(b) {
			return nil, fmt.Errorf("%w: attribute %d has length %d with %d bytes left", errMalformed, typ, l, len(b))
		}
		val := b[nlaHdrLen:l]
		switch typ {
		case attrName:
			// The kernel always NUL-terminates; tolerate a missing NUL anyway.
			for i, ch := range val {
				if ch == 0 {
					val = val[:i]
					break
				}
			}
			if len(val) == 0 {
				return nil, fmt.Errorf("%w: empty name attribute", errMalformed)
			}
			c.Name = string(val)
			seen |= 1
		case attrPackets, attrBytes:
			if len(val) != 8 {
				return nil, fmt.Errorf("%w: attribute %d has %d value bytes, want 8", errMalformed, typ, len(val))
			}
			v := binary.BigEndian.Uint64(val)
			if typ == attrPackets {
				c.Packets = v
				seen |= 2
			} else {
				c.Bytes = v
				seen |= 4
			}
		}
		// Attributes are padded to 4-byte alignment; the last one may omit it.
		adv := (l + 3) &^ 3
		if adv > len(b) {
			adv = len(b)
		}
		b = b[adv:]
	}
	if seen != 7 {
		return nil, fmt.Errorf("%w: missing attributes (have mask %03b, want 111)", errMalformed, seen)
	}
	return c, nil
}
