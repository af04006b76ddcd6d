//go:build linux

package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"

	"golang.org/x/sys/unix"
)

// Reading the kube-proxy table back over netlink, for the drift check
// (drift.go).
//
// The check needs two things from the kernel: its ruleset generation
// (NFT_MSG_GETGEN, a counter every committed transaction of any table
// moves), which is one small request; and, only when that moved, every
// chain, rule, set and element of our table. knftables lists rules and
// elements through the nft binary (which prints no rule text and dumps the
// whole ruleset into its cache first), so the table is dumped here with the
// same hand-encoded netlink as the element batches (nlbatch.go): one dump
// per object type, filtered by table in the request, plus one per set whose
// elements are compared.
//
// The messages (include/uapi/linux/netfilter/nf_tables.h), each a netlink
// header, an nfgenmsg (family, version, resource id) and attributes:
//
//	GETGEN                      -> NEWGEN     NFTA_GEN_ID (u32, big endian)
//	GETTABLE  NFTA_TABLE_NAME   -> NEWTABLE, or an error (ENOENT: no table)
//	GETCHAIN  dump, NFTA_CHAIN_TABLE       -> NEWCHAIN per chain: NFTA_CHAIN_NAME
//	GETRULE   dump, NFTA_RULE_TABLE        -> NEWRULE per rule, in chain order:
//	          NFTA_RULE_CHAIN, NFTA_RULE_EXPRESSIONS, NFTA_RULE_USERDATA
//	GETSET    dump, NFTA_SET_TABLE         -> NEWSET per set: NFTA_SET_NAME, NFTA_SET_FLAGS
//	GETSETELEM dump, NFTA_SET_ELEM_LIST_{TABLE,SET} -> NEWSETELEM: elements as
//	          written (NFTA_SET_ELEM_KEY, NFTA_SET_ELEM_DATA; see nlbatch.go)
const (
	nfnlSubsysNFTables = 10 // NFNL_SUBSYS_NFTABLES
	nftMsgGetTable     = 1
	nftMsgGetChain     = 4
	nftMsgGetRule      = 7
	nftMsgGetSet       = 10
	nftMsgGetSetElem   = 13
	nftMsgNewGen       = 15
	nftMsgGetGen       = 16

	nftaGenID              = 1 // NFTA_GEN_ID
	nftaTableName          = 1 // NFTA_TABLE_NAME
	nftaChainTable         = 1 // NFTA_CHAIN_TABLE
	nftaChainName          = 3 // NFTA_CHAIN_NAME
	nftaRuleTable          = 1 // NFTA_RULE_TABLE
	nftaRuleChain          = 2 // NFTA_RULE_CHAIN
	nftaRuleExpressions    = 4 // NFTA_RULE_EXPRESSIONS
	nftaRuleUserdata       = 7 // NFTA_RULE_USERDATA
	nftaSetTable           = 1 // NFTA_SET_TABLE
	nftaSetName            = 2 // NFTA_SET_NAME
	nftaSetFlags           = 3 // NFTA_SET_FLAGS
	nftaSetElemListTable   = 1 // NFTA_SET_ELEM_LIST_TABLE
	nftaSetElemListSet     = 2 // NFTA_SET_ELEM_LIST_SET
	nftaSetElemListElems   = 3 // NFTA_SET_ELEM_LIST_ELEMENTS
	nftaExprName           = 1 // NFTA_EXPR_NAME
	nftaExprData           = 2 // NFTA_EXPR_DATA
	nftSetAnonymous        = 0x1
	nftSetMap              = 0x8
	nlmFDumpIntr           = 0x10 // NLM_F_DUMP_INTR
	nftnlUdataRuleComment  = 0    // NFTNL_UDATA_RULE_COMMENT (libnftnl)
	nlaTypeMask            = 0x3fff
	dumpReceiveBufferBytes = 1 << 20
)

// errDumpInterrupted: the ruleset changed while it was being dumped, so the
// parts read may not fit together; the caller reads again.
var errDumpInterrupted = errors.New("the nftables ruleset changed during the dump")

// tableReader reads one family's kube-proxy table over a netfilter netlink
// socket opened, like netlinkElements', by its first use in the network
// namespace of the calling thread, and kept.
type tableReader struct {
	family byte // NFPROTO_IPV4 or NFPROTO_IPV6
	fd     int
	seq    uint32
	buf    []byte
	req    []byte
}

func newTableReader(ipv6 bool) *tableReader {
	r := &tableReader{family: unix.NFPROTO_IPV4, fd: -1}
	if ipv6 {
		r.family = unix.NFPROTO_IPV6
	}
	return r
}

func (r *tableReader) open() error {
	if r.fd >= 0 {
		return nil
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("netfilter netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		_ = unix.Close(fd)
		return fmt.Errorf("netfilter netlink socket: bind: %w", err)
	}
	tv := unix.NsecToTimeval(ackTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		_ = unix.Close(fd)
		return fmt.Errorf("netlink receive timeout: %w", err)
	}
	r.fd = fd
	if r.buf == nil {
		r.buf = make([]byte, dumpReceiveBufferBytes)
	}
	return nil
}

// close closes the socket; the next request opens a new one. It is called
// after any failure, so that answers left unread never answer a later
// request.
func (r *tableReader) close() {
	if r.fd >= 0 {
		_ = unix.Close(r.fd)
		r.fd = -1
	}
}

// request sends one request of type msg (an NFT_MSG_GET*) with string
// attributes attrs (type, value pairs) and calls fn with the attributes of
// every answer until the last. dump asks for all matching objects.
func (r *tableReader) request(msg uint16, family byte, dump bool, attrs []strAttr, fn func(attrs []byte) error) error {
	if err := r.open(); err != nil {
		return err
	}
	err := r.exchange(msg, family, dump, attrs, fn)
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, errDumpInterrupted) {
		r.close()
	}
	return err
}

type strAttr struct {
	typ   uint16
	value string
}

func (r *tableReader) exchange(msg uint16, family byte, dump bool, attrs []strAttr, fn func(attrs []byte) error) error {
	r.seq++
	seq := r.seq
	flags := uint16(unix.NLM_F_REQUEST)
	if dump {
		flags |= unix.NLM_F_DUMP
	} else {
		flags |= unix.NLM_F_ACK
	}
	b := r.req[:0]
	b = binary.NativeEndian.AppendUint32(b, 0) // length, patched below
	b = binary.NativeEndian.AppendUint16(b, nfnlSubsysNFTables<<8|msg)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0) // port id
	b = append(b, family, nfnetlinkV0, 0, 0)
	for _, a := range attrs {
		n := attrHeaderLen + len(a.value) + 1
		b = binary.NativeEndian.AppendUint16(b, uint16(n))
		b = binary.NativeEndian.AppendUint16(b, a.typ)
		b = append(b, a.value...)
		b = append(b, 0)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	binary.NativeEndian.PutUint32(b, uint32(len(b)))
	r.req = b
	for {
		err := unix.Sendto(r.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("sending netlink request %d: %w", msg, err)
		}
	}
	var interrupted, gotReply bool
	for {
		n, _, rflags, _, err := unix.Recvmsg(r.fd, r.buf, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the answer to netlink request %d: %w", msg, err)
		}
		if rflags&unix.MSG_TRUNC != 0 {
			return fmt.Errorf("reading the answer to netlink request %d: truncated at %d bytes", msg, n)
		}
		for m := r.buf[:n]; len(m) >= nlmsgHeaderLen; {
			size := int(binary.NativeEndian.Uint32(m))
			if size < nlmsgHeaderLen || size > len(m) {
				return fmt.Errorf("reading the answer to netlink request %d: a message of %d bytes in %d", msg, size, len(m))
			}
			typ := binary.NativeEndian.Uint16(m[4:])
			mflags := binary.NativeEndian.Uint16(m[6:])
			mseq := binary.NativeEndian.Uint32(m[8:])
			data := m[nlmsgHeaderLen:size]
			m = m[min(len(m), (size+3)&^3):]
			if mseq != seq {
				continue // an answer to an earlier, abandoned request
			}
			if mflags&nlmFDumpIntr != 0 {
				interrupted = true
			}
			switch typ {
			case unix.NLMSG_DONE:
				if interrupted {
					return errDumpInterrupted
				}
				return nil
			case unix.NLMSG_ERROR:
				if len(data) < 4 {
					return fmt.Errorf("netlink request %d: short error message", msg)
				}
				if code := int32(binary.NativeEndian.Uint32(data)); code != 0 {
					return fmt.Errorf("netlink request %d: %w", msg, unix.Errno(-code))
				}
				// The acknowledgement of a request that is not a dump
				// comes after its one answer.
				if !gotReply {
					return fmt.Errorf("netlink request %d: acknowledged without an answer", msg)
				}
				return nil
			}
			if len(data) < nfgenHeaderLen {
				continue
			}
			gotReply = true
			if err := fn(data[nfgenHeaderLen:]); err != nil {
				return err
			}
		}
	}
}

// eachAttr calls fn for each attribute in b (type without flags, payload).
func eachAttr(b []byte, fn func(typ uint16, payload []byte)) {
	for len(b) >= attrHeaderLen {
		n := int(binary.NativeEndian.Uint16(b))
		if n < attrHeaderLen || n > len(b) {
			return
		}
		fn(binary.NativeEndian.Uint16(b[2:])&nlaTypeMask, b[attrHeaderLen:n])
		b = b[min(len(b), (n+3)&^3):]
	}
}

// cString is a NUL-terminated netlink string attribute's text.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func cStringEqual(b []byte, s string) bool {
	if len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return string(b) == s
}

// generation returns the kernel's ruleset generation (all tables, all
// families): any committed change anywhere moves it.
func (r *tableReader) generation() (uint32, error) {
	var gen uint32
	var found bool
	err := r.request(nftMsgGetGen, unix.AF_UNSPEC, false, nil, func(attrs []byte) error {
		eachAttr(attrs, func(typ uint16, p []byte) {
			if typ == nftaGenID && len(p) >= 4 {
				gen, found = binary.BigEndian.Uint32(p), true
			}
		})
		return nil
	})
	if err == nil && !found {
		err = errors.New("the kernel's answer to NFT_MSG_GETGEN has no generation")
	}
	return gen, err
}

// tableExists reports whether the table exists.
func (r *tableReader) tableExists(table string) (bool, error) {
	err := r.request(nftMsgGetTable, r.family, false, []strAttr{{nftaTableName, table}}, func([]byte) error { return nil })
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOENT):
		return false, nil
	}
	return false, err
}

// chains calls fn with the name of every chain of table.
func (r *tableReader) chains(table string, fn func(name string)) error {
	return r.request(nftMsgGetChain, r.family, true, []strAttr{{nftaChainTable, table}}, func(attrs []byte) error {
		var name string
		ours := false
		eachAttr(attrs, func(typ uint16, p []byte) {
			switch typ {
			case nftaChainTable:
				ours = cStringEqual(p, table)
			case nftaChainName:
				name = cString(p)
			}
		})
		if ours && name != "" {
			fn(name)
		}
		return nil
	})
}

// kernelRule is what the drift check compares of one rule: its comment
// and a fingerprint of its expressions.
type kernelRule struct {
	comment    string
	hasComment bool
	// fingerprint hashes the rule's expressions without their state
	// (counters, quotas, limits), which traffic changes.
	fingerprint uint64
}

// statefulExprs are expressions whose attributes the packet path changes.
var statefulExprs = map[string]bool{"counter": true, "quota": true, "limit": true, "last": true, "connlimit": true}

// rules calls fn for every rule of table (of only chain, if not ""), in
// each chain's order.
func (r *tableReader) rules(table, only string, fn func(chain string, rule kernelRule)) error {
	h := fnv.New64a()
	attrs := []strAttr{{nftaRuleTable, table}}
	if only != "" {
		attrs = append(attrs, strAttr{nftaRuleChain, only})
	}
	return r.request(nftMsgGetRule, r.family, true, attrs, func(attrs []byte) error {
		var chain string
		var rule kernelRule
		ours := false
		h.Reset()
		eachAttr(attrs, func(typ uint16, p []byte) {
			switch typ {
			case nftaRuleTable:
				ours = cStringEqual(p, table)
			case nftaRuleChain:
				chain = cString(p)
			case nftaRuleExpressions:
				eachAttr(p, func(_ uint16, expr []byte) {
					var name, data []byte
					eachAttr(expr, func(typ uint16, p []byte) {
						switch typ {
						case nftaExprName:
							name = p
						case nftaExprData:
							data = p
						}
					})
					if statefulExprs[cString(name)] {
						_, _ = h.Write(name)
						return
					}
					_, _ = h.Write(name)
					_, _ = h.Write(data)
				})
			case nftaRuleUserdata:
				// libnftnl's TLVs: type, length, value.
				for u := p; len(u) >= 2 && len(u) >= 2+int(u[1]); u = u[2+int(u[1]):] {
					if u[0] == nftnlUdataRuleComment {
						rule.comment, rule.hasComment = cString(u[2:2+int(u[1])]), true
					}
				}
			}
		})
		if ours && chain != "" && (only == "" || chain == only) {
			rule.fingerprint = h.Sum64()
			fn(chain, rule)
		}
		return nil
	})
}

// kernelSet is one named set or map of the table.
type kernelSet struct {
	name  string
	isMap bool
}

// sets calls fn for every named (not anonymous) set and map of table.
func (r *tableReader) sets(table string, fn func(kernelSet)) error {
	return r.request(nftMsgGetSet, r.family, true, []strAttr{{nftaSetTable, table}}, func(attrs []byte) error {
		var s kernelSet
		var flags uint32
		ours := false
		eachAttr(attrs, func(typ uint16, p []byte) {
			switch typ {
			case nftaSetTable:
				ours = cStringEqual(p, table)
			case nftaSetName:
				s.name = cString(p)
			case nftaSetFlags:
				if len(p) >= 4 {
					flags = binary.BigEndian.Uint32(p)
				}
			}
		})
		if ours && s.name != "" && flags&nftSetAnonymous == 0 {
			s.isMap = flags&nftSetMap != 0
			fn(s)
		}
		return nil
	})
}

// kernelElem is one element as the kernel holds it: the key's bytes, and
// for a map either the value's bytes or a verdict. The slices point into
// the receive buffer and are valid only during the callback.
type kernelElem struct {
	key, value   []byte
	verdict      bool
	code         int32
	verdictChain []byte
}

// elements calls fn for every element of set (or map) name of table.
func (r *tableReader) elements(table, name string, fn func(*kernelElem)) error {
	var e kernelElem
	return r.request(nftMsgGetSetElem, r.family, true, []strAttr{{nftaSetElemListTable, table}, {nftaSetElemListSet, name}}, func(attrs []byte) error {
		eachAttr(attrs, func(typ uint16, p []byte) {
			if typ != nftaSetElemListElems {
				return
			}
			eachAttr(p, func(_ uint16, elem []byte) {
				e = kernelElem{}
				eachAttr(elem, func(typ uint16, p []byte) {
					switch typ {
					case nftaSetElemKey:
						eachAttr(p, func(typ uint16, v []byte) {
							if typ == nftaDataValue {
								e.key = v
							}
						})
					case nftaSetElemData:
						eachAttr(p, func(typ uint16, v []byte) {
							switch typ {
							case nftaDataValue:
								e.value = v
							case nftaDataVerdict:
								e.verdict = true
								eachAttr(v, func(typ uint16, v []byte) {
									switch typ {
									case nftaVerdictCode:
										if len(v) >= 4 {
											e.code = int32(binary.BigEndian.Uint32(v))
										}
									case nftaVerdictChain:
										e.verdictChain = v
									}
								})
							}
						})
					}
				})
				fn(&e)
			})
		})
		return nil
	})
}
