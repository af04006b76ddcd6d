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

package ipvs

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Interface manages IPVS virtual servers (services) and their real servers (destinations).
type Interface interface {
	// Flush deletes every virtual server of the network namespace.
	Flush() error
	// AddVirtualServer creates a virtual server.
	AddVirtualServer(*VirtualServer) error
	// UpdateVirtualServer changes the scheduler, flags or timeout of an existing virtual server.
	UpdateVirtualServer(*VirtualServer) error
	// DeleteVirtualServer deletes a virtual server and its real servers.
	DeleteVirtualServer(*VirtualServer) error
	// GetVirtualServer returns the virtual server with the given address, protocol and port.
	GetVirtualServer(*VirtualServer) (*VirtualServer, error)
	// GetVirtualServers returns all virtual servers.
	GetVirtualServers() ([]*VirtualServer, error)
	// AddRealServer adds a real server to a virtual server.
	AddRealServer(*VirtualServer, *RealServer) error
	// GetRealServers returns the real servers of a virtual server.
	GetRealServers(*VirtualServer) ([]*RealServer, error)
	// DeleteRealServer removes a real server from a virtual server.
	DeleteRealServer(*VirtualServer, *RealServer) error
	// UpdateRealServer changes the weight of a real server.
	UpdateRealServer(*VirtualServer, *RealServer) error
	// ConfigureTimeouts sets the TCP, TCP FIN and UDP connection timeouts; a zero duration
	// leaves that timeout unchanged.
	ConfigureTimeouts(time.Duration, time.Duration, time.Duration) error
}

// ErrNotAvailable is wrapped by every error caused by the kernel lacking IPVS.
var ErrNotAvailable = errors.New("IPVS is not available in this kernel (no IPVS generic netlink family; is the ip_vs module built and loadable?)")

// VirtualServer is an IPVS service: a virtual address, protocol and port.
type VirtualServer struct {
	Address   net.IP
	Protocol  string
	Port      uint16
	Scheduler string
	Flags     ServiceFlags
	Timeout   uint32
}

// ServiceFlags are IPVS service flags (IP_VS_SVC_F_*).
type ServiceFlags uint32

const (
	// FlagPersistent makes connections from one client stick to one real server.
	FlagPersistent = 0x1
	// FlagHashed is set by the kernel on every service in its table.
	FlagHashed = 0x2
	// FlagSourceHash is IP_VS_SVC_F_SCHED2, which the sh scheduler reads as "sh-port": hash the
	// client's source port along with its address.
	FlagSourceHash = 0x10
)

// Equal reports whether the two virtual servers have the same identity and settings.
func (svc *VirtualServer) Equal(other *VirtualServer) bool {
	return svc.Address.Equal(other.Address) &&
		svc.Protocol == other.Protocol &&
		svc.Port == other.Port &&
		svc.Scheduler == other.Scheduler &&
		svc.Flags == other.Flags &&
		svc.Timeout == other.Timeout
}

// String returns "address:port/protocol".
func (svc *VirtualServer) String() string {
	return net.JoinHostPort(svc.Address.String(), strconv.Itoa(int(svc.Port))) + "/" + svc.Protocol
}

// RealServer is an IPVS destination of a virtual server.
type RealServer struct {
	Address      net.IP
	Port         uint16
	Weight       int
	ActiveConn   int
	InactiveConn int
}

// String returns "address:port".
func (rs *RealServer) String() string {
	return net.JoinHostPort(rs.Address.String(), strconv.Itoa(int(rs.Port)))
}

// Equal reports whether the two real servers have the same address and port; weight and
// connection counts are state, not identity.
func (rs *RealServer) Equal(other *RealServer) bool {
	return rs.Address.Equal(other.Address) && rs.Port == other.Port
}

// Protocol is an IP protocol number as IPVS stores it.
type Protocol uint16

// IsRsGracefulTerminationNeeded reports whether real servers of this protocol should be
// drained (weight 0) before removal. UDP and SCTP have no connection teardown to wait for.
func IsRsGracefulTerminationNeeded(proto string) bool {
	return !strings.EqualFold(proto, "UDP") && !strings.EqualFold(proto, "SCTP")
}

// unavailable implements Interface for a kernel without IPVS: every call fails with the
// reason, instead of the nil Interface upstream returns, which panics on first use.
type unavailable struct {
	err error
}

func (u unavailable) fail(op string) error { return fmt.Errorf("ipvs %s: %w", op, u.err) }

func (u unavailable) Flush() error                             { return u.fail("flush") }
func (u unavailable) AddVirtualServer(vs *VirtualServer) error { return u.fail("add virtual server") }
func (u unavailable) UpdateVirtualServer(*VirtualServer) error {
	return u.fail("update virtual server")
}
func (u unavailable) DeleteVirtualServer(*VirtualServer) error {
	return u.fail("delete virtual server")
}
func (u unavailable) GetVirtualServer(*VirtualServer) (*VirtualServer, error) {
	return nil, u.fail("get virtual server")
}
func (u unavailable) GetVirtualServers() ([]*VirtualServer, error) {
	return nil, u.fail("list virtual servers")
}
func (u unavailable) AddRealServer(*VirtualServer, *RealServer) error {
	return u.fail("add real server")
}
func (u unavailable) GetRealServers(*VirtualServer) ([]*RealServer, error) {
	return nil, u.fail("list real servers")
}
func (u unavailable) DeleteRealServer(*VirtualServer, *RealServer) error {
	return u.fail("delete real server")
}
func (u unavailable) UpdateRealServer(*VirtualServer, *RealServer) error {
	return u.fail("update real server")
}
func (u unavailable) ConfigureTimeouts(time.Duration, time.Duration, time.Duration) error {
	return u.fail("configure timeouts")
}
