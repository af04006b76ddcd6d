//go:build linux

package iptables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// NFTablesGeneration reads the nf_tables generation of the calling thread's network
// namespace with one NFT_MSG_GETGEN netlink request (see GenerationReader). It needs
// CAP_NET_ADMIN, as every nfnetlink request does.
func NFTablesGeneration() (uint32, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return 0, fmt.Errorf("nf_tables generation: opening a netfilter netlink socket: %w", err)
	}
	defer unix.Close(fd)
	// The kernel answers at once; the timeout only keeps a broken kernel from hanging
	// the caller.
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return 0, fmt.Errorf("nf_tables generation: setting a receive timeout: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("nf_tables generation: binding the netlink socket: %w", err)
	}
	const seq = 1
	msgType := uint16(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN)
	// struct nlmsghdr, then struct nfgenmsg {family, version, res_id}.
	req := make([]byte, unix.NLMSG_HDRLEN+4)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], msgType)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(req[8:], seq)
	req[unix.NLMSG_HDRLEN] = unix.AF_UNSPEC
	req[unix.NLMSG_HDRLEN+1] = unix.NFNETLINK_V0
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("nf_tables generation: sending NFT_MSG_GETGEN: %w", err)
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return 0, fmt.Errorf("nf_tables generation: reading the answer: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return 0, fmt.Errorf("nf_tables generation: parsing the answer: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if errno := -int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
						return 0, fmt.Errorf("nf_tables generation: NFT_MSG_GETGEN: %w", syscall.Errno(errno))
					}
				}
			case uint16(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWGEN):
				return parseGeneration(m.Data)
			}
		}
	}
}

// parseGeneration reads NFTA_GEN_ID from an NFT_MSG_NEWGEN message's payload: a struct
// nfgenmsg, then netlink attributes.
func parseGeneration(data []byte) (uint32, error) {
	if len(data) < 4 {
		return 0, errors.New("nf_tables generation: short NFT_MSG_NEWGEN message")
	}
	attrs := data[4:]
	for len(attrs) >= unix.NLA_HDRLEN {
		l := int(binary.NativeEndian.Uint16(attrs[0:]))
		typ := binary.NativeEndian.Uint16(attrs[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if l < unix.NLA_HDRLEN || l > len(attrs) {
			break
		}
		if typ == unix.NFTA_GEN_ID && l >= unix.NLA_HDRLEN+4 {
			return binary.BigEndian.Uint32(attrs[unix.NLA_HDRLEN:]), nil
		}
		next := (l + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		if next > len(attrs) {
			break
		}
		attrs = attrs[next:]
	}
	return 0, errors.New("nf_tables generation: NFT_MSG_NEWGEN without NFTA_GEN_ID")
}
