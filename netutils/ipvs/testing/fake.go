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

// Package testing provides an in-memory ipvs.Interface for unit tests.
package testing

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/net-utils/ipvs"
)

// ServiceKey identifies a virtual server.
type ServiceKey struct {
	IP       string
	Port     uint16
	Protocol string
}

func (s *ServiceKey) String() string {
	return net.JoinHostPort(s.IP, strconv.Itoa(int(s.Port))) + "/" + s.Protocol
}

// RealServerKey identifies a real server of a virtual server.
type RealServerKey struct {
	Address net.IP
	Port    uint16
}

func (r *RealServerKey) String() string {
	return net.JoinHostPort(r.Address.String(), strconv.Itoa(int(r.Port)))
}

// FakeIPVS is an in-memory ipvs.Interface that behaves like the kernel where upstream's fake
// did not: adding an existing virtual or real server fails (EEXIST), deleting or updating a
// missing one fails (ESRCH / ENOENT), Flush leaves the fake usable, and ConfigureTimeouts
// records its arguments instead of failing. Getters return copies, so callers cannot change
// the fake's state by editing results (addresses included). Destinations are kept sorted by
// address, as upstream proxier tests expect.
//
// Services and Destinations may be read, and their values edited (connection counters, say),
// directly when no other goroutine uses the fake.
type FakeIPVS struct {
	mu sync.Mutex
	// order is the keys of Services as GetVirtualServers last sorted them. It is reused while
	// Services holds exactly these keys, so listing an unchanged table costs no sort; it is
	// checked against Services on each use rather than kept up to date, so that edits made
	// to the exported map directly are also seen.
	order []ServiceKey
	// Scheduler is unused; kept for compatibility with upstream's fake.
	Scheduler    string
	Services     map[ServiceKey]*ipvs.VirtualServer
	Destinations map[ServiceKey][]*ipvs.RealServer
	// TCPTimeout, TCPFinTimeout and UDPTimeout hold the last non-zero values passed to
	// ConfigureTimeouts.
	TCPTimeout, TCPFinTimeout, UDPTimeout time.Duration
}

var _ ipvs.Interface = &FakeIPVS{}

// NewFake returns an empty FakeIPVS.
func NewFake() *FakeIPVS {
	return &FakeIPVS{
		Services:     map[ServiceKey]*ipvs.VirtualServer{},
		Destinations: map[ServiceKey][]*ipvs.RealServer{},
	}
}

func (f *FakeIPVS) init() {
	if f.Services == nil {
		f.Services = map[ServiceKey]*ipvs.VirtualServer{}
	}
	if f.Destinations == nil {
		f.Destinations = map[ServiceKey][]*ipvs.RealServer{}
	}
}

func toServiceKey(vs *ipvs.VirtualServer) ServiceKey {
	return ServiceKey{IP: vs.Address.String(), Port: vs.Port, Protocol: strings.ToUpper(vs.Protocol)}
}

func copyVS(vs *ipvs.VirtualServer) *ipvs.VirtualServer {
	c := *vs
	c.Address = slices.Clone(vs.Address)
	return &c
}

func copyRS(rs *ipvs.RealServer) *ipvs.RealServer {
	c := *rs
	c.Address = slices.Clone(rs.Address)
	return &c
}

func checkVS(op string, vs *ipvs.VirtualServer) error {
	if vs == nil {
		return fmt.Errorf("%s: nil virtual server", op)
	}
	if vs.Address == nil {
		return fmt.Errorf("%s %s: nil address", op, vs)
	}
	switch strings.ToUpper(vs.Protocol) {
	case "TCP", "UDP", "SCTP":
	default:
		return fmt.Errorf("%s %s: unsupported protocol %q", op, vs, vs.Protocol)
	}
	return nil
}

// AddVirtualServer implements ipvs.Interface.
func (f *FakeIPVS) AddVirtualServer(vs *ipvs.VirtualServer) error {
	if err := checkVS("adding virtual server", vs); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	key := toServiceKey(vs)
	if _, ok := f.Services[key]; ok {
		return fmt.Errorf("adding virtual server %s: file exists", key.String())
	}
	f.Services[key] = copyVS(vs)
	f.Destinations[key] = []*ipvs.RealServer{}
	return nil
}

// UpdateVirtualServer implements ipvs.Interface.
func (f *FakeIPVS) UpdateVirtualServer(vs *ipvs.VirtualServer) error {
	if err := checkVS("updating virtual server", vs); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := toServiceKey(vs)
	if _, ok := f.Services[key]; !ok {
		return fmt.Errorf("updating virtual server %s: no such process", key.String())
	}
	f.Services[key] = copyVS(vs)
	// The protocol's spelling, which String() and so the order use, may have changed.
	f.order = nil
	return nil
}

// DeleteVirtualServer implements ipvs.Interface.
func (f *FakeIPVS) DeleteVirtualServer(vs *ipvs.VirtualServer) error {
	if err := checkVS("deleting virtual server", vs); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := toServiceKey(vs)
	if _, ok := f.Services[key]; !ok {
		return fmt.Errorf("deleting virtual server %s: no such process", key.String())
	}
	delete(f.Services, key)
	delete(f.Destinations, key)
	return nil
}

// GetVirtualServer implements ipvs.Interface.
func (f *FakeIPVS) GetVirtualServer(vs *ipvs.VirtualServer) (*ipvs.VirtualServer, error) {
	if err := checkVS("getting virtual server", vs); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := toServiceKey(vs)
	got, ok := f.Services[key]
	if !ok {
		return nil, fmt.Errorf("getting virtual server %s: not found", key.String())
	}
	return copyVS(got), nil
}

// GetVirtualServers implements ipvs.Interface; the result is sorted by String().
func (f *FakeIPVS) GetVirtualServers() ([]*ipvs.VirtualServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.orderCurrent() {
		f.sortOrder()
	}
	// One backing array for the copies and one for their addresses, rather than two
	// allocations per virtual server: listing a large table is what a full sync does.
	vss := make([]ipvs.VirtualServer, len(f.order))
	out := make([]*ipvs.VirtualServer, len(f.order))
	for i, k := range f.order {
		vss[i] = *f.Services[k]
		out[i] = &vss[i]
	}
	cloneAddrs(len(vss), func(i int) *net.IP { return &vss[i].Address })
	return out, nil
}

// cloneAddrs replaces each of n addresses with a copy, all copies in one backing array, each
// capped at its length so that appending to one cannot overwrite the next.
func cloneAddrs(n int, addr func(i int) *net.IP) {
	total := 0
	for i := range n {
		total += len(*addr(i))
	}
	buf := make([]byte, 0, total)
	for i := range n {
		ip := addr(i)
		if *ip == nil {
			continue
		}
		start := len(buf)
		buf = append(buf, *ip...)
		*ip = buf[start:len(buf):len(buf)]
	}
}

// orderCurrent reports whether f.order holds exactly the keys of f.Services: as many keys,
// distinct, each present.
func (f *FakeIPVS) orderCurrent() bool {
	if f.order == nil || len(f.order) != len(f.Services) {
		return false
	}
	for _, k := range f.order {
		if _, ok := f.Services[k]; !ok {
			return false
		}
	}
	return true
}

// sortOrder sorts the keys of f.Services by their virtual server's String(), naming each
// once rather than on every comparison.
func (f *FakeIPVS) sortOrder() {
	type named struct {
		key  ServiceKey
		name string
	}
	all := make([]named, 0, len(f.Services))
	for k, vs := range f.Services {
		all = append(all, named{k, vs.String()})
	}
	slices.SortFunc(all, func(a, b named) int { return strings.Compare(a.name, b.name) })
	f.order = make([]ServiceKey, len(all))
	for i := range all {
		f.order[i] = all[i].key
	}
}

// Flush implements ipvs.Interface.
func (f *FakeIPVS) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Services = map[ServiceKey]*ipvs.VirtualServer{}
	f.Destinations = map[ServiceKey][]*ipvs.RealServer{}
	return nil
}

func (f *FakeIPVS) findRS(op string, vs *ipvs.VirtualServer, rs *ipvs.RealServer) (ServiceKey, int, error) {
	if err := checkVS(op, vs); err != nil {
		return ServiceKey{}, -1, err
	}
	if rs == nil || rs.Address == nil {
		return ServiceKey{}, -1, fmt.Errorf("%s for virtual server %s: nil real server or address", op, vs)
	}
	key := toServiceKey(vs)
	if _, ok := f.Services[key]; !ok {
		return key, -1, fmt.Errorf("%s %s for virtual server %s: no such process", op, rs, key.String())
	}
	i := slices.IndexFunc(f.Destinations[key], rs.Equal)
	return key, i, nil
}

// AddRealServer implements ipvs.Interface.
func (f *FakeIPVS) AddRealServer(vs *ipvs.VirtualServer, rs *ipvs.RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key, i, err := f.findRS("adding real server", vs, rs)
	if err != nil {
		return err
	}
	if i >= 0 {
		return fmt.Errorf("adding real server %s to virtual server %s: file exists", rs, key.String())
	}
	dests := append(f.Destinations[key], copyRS(rs))
	slices.SortFunc(dests, func(a, b *ipvs.RealServer) int { return strings.Compare(a.String(), b.String()) })
	f.Destinations[key] = dests
	return nil
}

// GetRealServers implements ipvs.Interface.
func (f *FakeIPVS) GetRealServers(vs *ipvs.VirtualServer) ([]*ipvs.RealServer, error) {
	if err := checkVS("listing real servers", vs); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := toServiceKey(vs)
	if _, ok := f.Services[key]; !ok {
		return nil, fmt.Errorf("listing real servers of virtual server %s: no such process", key.String())
	}
	// As GetVirtualServers, copies in one backing array: a full sync lists every virtual
	// server's real servers.
	dests := f.Destinations[key]
	rss := make([]ipvs.RealServer, len(dests))
	out := make([]*ipvs.RealServer, len(dests))
	for i, rs := range dests {
		rss[i] = *rs
		out[i] = &rss[i]
	}
	cloneAddrs(len(rss), func(i int) *net.IP { return &rss[i].Address })
	return out, nil
}

// DeleteRealServer implements ipvs.Interface.
func (f *FakeIPVS) DeleteRealServer(vs *ipvs.VirtualServer, rs *ipvs.RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key, i, err := f.findRS("deleting real server", vs, rs)
	if err != nil {
		return err
	}
	if i < 0 {
		return fmt.Errorf("deleting real server %s from virtual server %s: no such file or directory", rs, key.String())
	}
	f.Destinations[key] = slices.Delete(f.Destinations[key], i, i+1)
	return nil
}

// UpdateRealServer implements ipvs.Interface: it changes the weight in place, keeping the
// connection counters, as the kernel does.
func (f *FakeIPVS) UpdateRealServer(vs *ipvs.VirtualServer, rs *ipvs.RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key, i, err := f.findRS("updating real server", vs, rs)
	if err != nil {
		return err
	}
	if i < 0 {
		return fmt.Errorf("updating real server %s of virtual server %s: no such file or directory", rs, key.String())
	}
	f.Destinations[key][i].Weight = rs.Weight
	return nil
}

// ConfigureTimeouts implements ipvs.Interface.
func (f *FakeIPVS) ConfigureTimeouts(tcp, tcpFin, udp time.Duration) error {
	if tcp < 0 || tcpFin < 0 || udp < 0 {
		return fmt.Errorf("negative IPVS timeout (tcp=%s tcpfin=%s udp=%s)", tcp, tcpFin, udp)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if tcp > 0 {
		f.TCPTimeout = tcp
	}
	if tcpFin > 0 {
		f.TCPFinTimeout = tcpFin
	}
	if udp > 0 {
		f.UDPTimeout = udp
	}
	return nil
}
