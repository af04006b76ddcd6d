package proxy

import (
	"net"
	"net/netip"
	"strconv"

	"k8s.io/apimachinery/pkg/util/sets"
)

// Endpoint is one backend of a service port as a proxier sees it.
//
// Third parties implement this interface with their own types, so its method
// set is frozen: adding a method would break them.
type Endpoint interface {
	// String returns "ip:port" (IPv6 bracketed). It identifies the endpoint
	// within a service port.
	String() string
	// IP returns the endpoint's IP without the port.
	IP() string
	// Port returns the endpoint's port.
	Port() int
	// IsLocal reports whether the endpoint runs on this node.
	IsLocal() bool
	// IsReady reports the EndpointSlice "ready" condition (unset means true).
	IsReady() bool
	// IsServing reports the "serving" condition (unset means true).
	IsServing() bool
	// IsTerminating reports the "terminating" condition (unset means false).
	IsTerminating() bool
	// ZoneHints returns the zones this endpoint is hinted for; empty when
	// it carries no zone hints.
	ZoneHints() sets.Set[string]
	// NodeHints returns the nodes this endpoint is hinted for; empty when
	// it carries no node hints.
	NodeHints() sets.Set[string]
}

// BaseEndpointInfo is the standard Endpoint built from an EndpointSlice
// endpoint. Proxiers that need more per-endpoint data wrap it.
type BaseEndpointInfo struct {
	ip       string
	port     int
	endpoint string // "ip:port", precomputed: String() is on every hot path

	isLocal     bool
	ready       bool
	serving     bool
	terminating bool

	zoneHints sets.Set[string]
	nodeHints sets.Set[string]
}

var _ Endpoint = &BaseEndpointInfo{}

// String implements Endpoint.
func (info *BaseEndpointInfo) String() string { return info.endpoint }

// IP implements Endpoint.
func (info *BaseEndpointInfo) IP() string { return info.ip }

// Port implements Endpoint.
func (info *BaseEndpointInfo) Port() int { return info.port }

// IsLocal implements Endpoint.
func (info *BaseEndpointInfo) IsLocal() bool { return info.isLocal }

// IsReady implements Endpoint.
func (info *BaseEndpointInfo) IsReady() bool { return info.ready }

// IsServing implements Endpoint.
func (info *BaseEndpointInfo) IsServing() bool { return info.serving }

// IsTerminating implements Endpoint.
func (info *BaseEndpointInfo) IsTerminating() bool { return info.terminating }

// ZoneHints implements Endpoint.
func (info *BaseEndpointInfo) ZoneHints() sets.Set[string] { return info.zoneHints }

// NodeHints implements Endpoint.
func (info *BaseEndpointInfo) NodeHints() sets.Set[string] { return info.nodeHints }

func newBaseEndpointInfo(ip string, port int, isLocal, ready, serving, terminating bool, zoneHints, nodeHints sets.Set[string]) *BaseEndpointInfo {
	return &BaseEndpointInfo{
		ip:          ip,
		port:        port,
		endpoint:    net.JoinHostPort(ip, strconv.Itoa(port)),
		isLocal:     isLocal,
		ready:       ready,
		serving:     serving,
		terminating: terminating,
		zoneHints:   zoneHints,
		nodeHints:   nodeHints,
	}
}

// newBaseEndpointInfoFromAddr is newBaseEndpointInfo for the conversion hot
// path: the IP and "ip:port" strings share one allocation.
func newBaseEndpointInfoFromAddr(addr netip.Addr, port int, isLocal, ready, serving, terminating bool, zoneHints, nodeHints sets.Set[string]) *BaseEndpointInfo {
	var buf [64]byte
	b := buf[:0]
	start := 0
	if addr.Is6() {
		b = append(b, '[')
		start = 1
	}
	b = addr.AppendTo(b)
	end := len(b)
	if addr.Is6() {
		b = append(b, ']')
	}
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(port), 10)
	endpoint := string(b)
	return &BaseEndpointInfo{
		ip:          endpoint[start:end],
		port:        port,
		endpoint:    endpoint,
		isLocal:     isLocal,
		ready:       ready,
		serving:     serving,
		terminating: terminating,
		zoneHints:   zoneHints,
		nodeHints:   nodeHints,
	}
}
