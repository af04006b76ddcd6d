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

package ipvs

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"time"

	libipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// ipvsGenlFamily is the generic netlink family the ip_vs module registers.
const ipvsGenlFamily = "IPVS"

// lookupFamily and loadModule are variables so tests can simulate kernels with and without
// IPVS without root or modules.
var (
	lookupFamily = func() error {
		_, err := netlink.GenlFamilyGet(ipvsGenlFamily)
		return err
	}
	loadModule = func() error {
		path, err := exec.LookPath("modprobe")
		if err != nil {
			return err
		}
		out, err := exec.Command(path, "-q", "ip_vs").CombinedOutput()
		if err != nil {
			return fmt.Errorf("modprobe ip_vs: %w (%s)", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
)

// Available returns nil if the kernel offers IPVS, loading the ip_vs module first if needed
// (as upstream does through moby/ipvs), or an error wrapping ErrNotAvailable saying why not.
//
// It checks the generic netlink family directly because moby/ipvs does not: without the
// family its handle sends requests to family 0 and reports success or hangs.
func Available() error {
	err := lookupFamily()
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%w: looking up the %s netlink family: %w", ErrNotAvailable, ipvsGenlFamily, err)
	}
	modErr := loadModule()
	if err := lookupFamily(); err == nil {
		return nil
	}
	if modErr != nil {
		return fmt.Errorf("%w: %w", ErrNotAvailable, modErr)
	}
	return ErrNotAvailable
}

type runner struct {
	// mu serialises netlink requests: moby/ipvs matches replies by sequence number on a single
	// socket and is not safe for concurrent requests.
	mu     sync.Mutex
	handle *libipvs.Handle
}

var _ Interface = &runner{}

// New returns an Interface for the calling thread's network namespace. When IPVS is not
// available it logs the reason and returns an Interface whose methods all fail with it.
func New() Interface {
	ipvs, err := NewChecked()
	if err != nil {
		klog.Background().Error(err, "IPVS interface can't be initialized")
		return unavailable{err: err}
	}
	return ipvs
}

// NewChecked is New reporting unavailability as an error instead of deferring it.
func NewChecked() (Interface, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	h, err := libipvs.New("")
	if err != nil {
		return nil, fmt.Errorf("opening IPVS netlink handle: %w", err)
	}
	return &runner{handle: h}, nil
}

func (r *runner) AddVirtualServer(vs *VirtualServer) error {
	svc, err := toIPVSService(vs)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.handle.NewService(svc); err != nil {
		return fmt.Errorf("adding IPVS virtual server %s: %w", vs, err)
	}
	return nil
}

func (r *runner) UpdateVirtualServer(vs *VirtualServer) error {
	svc, err := toIPVSService(vs)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.handle.UpdateService(svc); err != nil {
		return fmt.Errorf("updating IPVS virtual server %s: %w", vs, err)
	}
	return nil
}

func (r *runner) DeleteVirtualServer(vs *VirtualServer) error {
	svc, err := toIPVSService(vs)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.handle.DelService(svc); err != nil {
		return fmt.Errorf("deleting IPVS virtual server %s: %w", vs, err)
	}
	return nil
}

func (r *runner) GetVirtualServer(vs *VirtualServer) (*VirtualServer, error) {
	svc, err := toIPVSService(vs)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	got, err := r.handle.GetService(svc)
	r.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("getting IPVS virtual server %s: %w", vs, err)
	}
	return toVirtualServer(got)
}

func (r *runner) GetVirtualServers() ([]*VirtualServer, error) {
	r.mu.Lock()
	svcs, err := r.handle.GetServices()
	r.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("listing IPVS virtual servers: %w", err)
	}
	out := make([]*VirtualServer, 0, len(svcs))
	for _, svc := range svcs {
		vs, err := toVirtualServer(svc)
		if err != nil {
			return nil, err
		}
		out = append(out, vs)
	}
	return out, nil
}

func (r *runner) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.handle.Flush(); err != nil {
		return fmt.Errorf("flushing IPVS: %w", err)
	}
	return nil
}

func (r *runner) AddRealServer(vs *VirtualServer, rs *RealServer) error {
	svc, dst, err := toIPVSPair(vs, rs)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.handle.NewDestination(svc, dst); err != nil {
		return fmt.Errorf("adding real server %s to IPVS virtual server %s: %w", rs, vs, err)
	}
	return nil
}

func (r *runner) DeleteRealServer(vs *VirtualServer, rs *RealServer) error {
	svc, dst, err := toIPVSPair(vs, rs)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.handle.DelDestination(svc, dst); err != nil {
		return fmt.Errorf("deleting real server %s from IPVS virtual server %s: %w", rs, vs, err)
	}
	return nil
}

func (r *runner) UpdateRealServer(vs *VirtualServer, rs *RealServer) error {
	svc, dst, err := toIPVSPair(vs, rs)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.handle.UpdateDestination(svc, dst); err != nil {
		return fmt.Errorf("updating real server %s of IPVS virtual server %s: %w", rs, vs, err)
	}
	return nil
}

func (r *runner) GetRealServers(vs *VirtualServer) ([]*RealServer, error) {
	svc, err := toIPVSService(vs)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	dsts, err := r.handle.GetDestinations(svc)
	r.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("listing real servers of IPVS virtual server %s: %w", vs, err)
	}
	out := make([]*RealServer, 0, len(dsts))
	for _, dst := range dsts {
		rs, err := toRealServer(dst)
		if err != nil {
			return nil, err
		}
		out = append(out, rs)
	}
	return out, nil
}

func (r *runner) ConfigureTimeouts(tcpTimeout, tcpFinTimeout, udpTimeout time.Duration) error {
	if err := checkTimeouts(tcpTimeout, tcpFinTimeout, udpTimeout); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.handle.SetConfig(&libipvs.Config{
		TimeoutTCP:    tcpTimeout,
		TimeoutTCPFin: tcpFinTimeout,
		TimeoutUDP:    udpTimeout,
	})
	if err != nil {
		return fmt.Errorf("setting IPVS timeouts tcp=%s tcpfin=%s udp=%s: %w", tcpTimeout, tcpFinTimeout, udpTimeout, err)
	}
	return nil
}

func toVirtualServer(svc *libipvs.Service) (*VirtualServer, error) {
	if svc == nil {
		return nil, errors.New("kernel returned an empty IPVS service")
	}
	if svc.Flags&FlagHashed == 0 {
		return nil, fmt.Errorf("IPVS service %s:%d lacks the hashed flag (0x%x) the kernel sets on every service in its table", svc.Address, svc.Port, FlagHashed)
	}
	vs := &VirtualServer{
		Address:   svc.Address,
		Port:      svc.Port,
		Scheduler: svc.SchedName,
		Protocol:  protocolToString(Protocol(svc.Protocol)),
		Flags:     ServiceFlags(svc.Flags &^ uint32(FlagHashed)),
		Timeout:   svc.Timeout,
	}
	if vs.Address == nil {
		// Firewall-mark services have no address; report the family's zero address.
		if svc.AddressFamily == unix.AF_INET {
			vs.Address = net.IPv4zero
		} else {
			vs.Address = net.IPv6zero
		}
	}
	return vs, nil
}

func toRealServer(dst *libipvs.Destination) (*RealServer, error) {
	if dst == nil {
		return nil, errors.New("kernel returned an empty IPVS destination")
	}
	return &RealServer{
		Address:      dst.Address,
		Port:         dst.Port,
		Weight:       dst.Weight,
		ActiveConn:   dst.ActiveConnections,
		InactiveConn: dst.InactiveConnections,
	}, nil
}

func toIPVSService(vs *VirtualServer) (*libipvs.Service, error) {
	if err := checkVirtualServer(vs); err != nil {
		return nil, err
	}
	svc := &libipvs.Service{
		Address:   vs.Address,
		Protocol:  stringToProtocol(vs.Protocol),
		Port:      vs.Port,
		SchedName: vs.Scheduler,
		Flags:     uint32(vs.Flags),
		Timeout:   vs.Timeout,
	}
	if vs.Address.To4() != nil {
		svc.AddressFamily = unix.AF_INET
		svc.Netmask = 0xffffffff
	} else {
		svc.AddressFamily = unix.AF_INET6
		svc.Netmask = 128
	}
	return svc, nil
}

func toIPVSPair(vs *VirtualServer, rs *RealServer) (*libipvs.Service, *libipvs.Destination, error) {
	svc, err := toIPVSService(vs)
	if err != nil {
		return nil, nil, err
	}
	if err := checkRealServer(vs, rs); err != nil {
		return nil, nil, err
	}
	return svc, &libipvs.Destination{Address: rs.Address, Port: rs.Port, Weight: rs.Weight}, nil
}
