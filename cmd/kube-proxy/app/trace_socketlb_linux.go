//go:build linux

package app

import (
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/kube-proxy/pkg/proxy/ebpf"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// readSocketLB reads what the socket load balancer's maps, pinned under pinPath
// (empty: ebpf.DefaultPinPath), do with pk. With nothing pinned it returns nil, unless
// expected (--socket-lb was given), when the answer says it is not running.
func readSocketLB(pk trace.Packet, pinPath string, expected bool) (*trace.SocketLB, error) {
	if pinPath == "" {
		pinPath = ebpf.DefaultPinPath
	}
	pinned, err := ebpf.Pinned(pinPath)
	if err != nil {
		return nil, err
	}
	source := "maps pinned at " + pinPath
	if len(pinned) == 0 {
		if !expected {
			return nil, nil
		}
		return &trace.SocketLB{Source: pinPath, Why: "not running: nothing is pinned at " + pinPath + ", so no socket is translated."}, nil
	}
	// The connect hook of the socket's family decides; a socket of the other family
	// reaching an IPv4 Service through a mapped address goes through connect6, so
	// either counts for IPv4.
	attached := slices.Contains(pinned, "link_connect6")
	if pk.Dst.Is4() {
		attached = attached || slices.Contains(pinned, "link_connect4")
	}
	if sees, _ := trace.SocketLBSees(pk); !sees {
		return trace.NewSocketLB(pk, source, attached, false, nil, false, 0), nil
	}
	maps, closeMaps, err := ebpf.OpenPinnedReadOnly(pinPath)
	if err != nil {
		return nil, err
	}
	defer closeMaps()
	proto := localnode.TCP
	if pk.Protocol == "udp" {
		proto = localnode.UDP
	}
	t, err := maps.Lookup(netip.AddrPortFrom(pk.Dst, pk.Port), proto)
	if err != nil {
		return nil, fmt.Errorf("looking up %s: %w", netip.AddrPortFrom(pk.Dst, pk.Port), err)
	}
	if t == nil {
		return trace.NewSocketLB(pk, source, attached, false, nil, false, 0), nil
	}
	return trace.NewSocketLB(pk, source, attached, true, t.Endpoints, t.Reject, t.AffinityTimeout), nil
}
