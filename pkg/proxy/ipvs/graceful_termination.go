//go:build linux

package ipvs

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
	utilipvs "k8s.io/net-utils/ipvs"
	"k8s.io/utils/clock"
)

// rsCheckDeleteInterval is how often draining real servers are looked at.
const rsCheckDeleteInterval = time.Minute

type listItem struct {
	VirtualServer *utilipvs.VirtualServer
	RealServer    *utilipvs.RealServer
}

func (g *listItem) String() string { return GetUniqueRSName(g.VirtualServer, g.RealServer) }

// GetUniqueRSName names a real server of a virtual server, as the
// termination list keys it: "vip:port/PROTO/rip:port".
func GetUniqueRSName(vs *utilipvs.VirtualServer, rs *utilipvs.RealServer) string {
	return vs.String() + "/" + rs.String()
}

// GracefulTerminationManager drains real servers before deleting them: a
// removed TCP real server gets weight 0, so it takes no new connections, and
// is deleted once its connection counts reach 0. UDP and SCTP real servers
// are deleted at once.
type GracefulTerminationManager struct {
	mu    sync.Mutex
	list  map[string]*listItem
	ipvs  utilipvs.Interface
	clock clock.WithTicker
}

// NewGracefulTerminationManager returns a manager working through ipvs.
func NewGracefulTerminationManager(ipvs utilipvs.Interface) *GracefulTerminationManager {
	return &GracefulTerminationManager{list: map[string]*listItem{}, ipvs: ipvs, clock: clock.RealClock{}}
}

// InTerminationList reports whether the real server named uniqueRS (see
// GetUniqueRSName) is draining.
func (m *GracefulTerminationManager) InTerminationList(uniqueRS string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.list[uniqueRS]
	return ok
}

// GracefulDeleteRS deletes rs from vs now if it may be (no connections, or
// a protocol without teardown), else sets its weight to 0 and lists it for
// deletion once drained.
func (m *GracefulTerminationManager) GracefulDeleteRS(vs *utilipvs.VirtualServer, rs *utilipvs.RealServer) error {
	item := &listItem{VirtualServer: vs, RealServer: rs}
	deleted, err := m.tryDelete(item)
	if err != nil {
		klog.Background().Error(err, "Error in deleting real server", "realServer", item)
	}
	if deleted {
		return nil
	}
	rs.Weight = 0
	if err := m.ipvs.UpdateRealServer(vs, rs); err != nil {
		return fmt.Errorf("setting weight 0 on real server %s: %w", item, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.list[item.String()]; !ok {
		klog.Background().V(5).Info("Adding real server to graceful delete real server list", "realServer", item)
		m.list[item.String()] = item
	}
	return nil
}

// tryDelete deletes the real server if it has drained. It reports true when
// the real server is gone (also when it was already).
func (m *GracefulTerminationManager) tryDelete(item *listItem) (bool, error) {
	rss, err := m.ipvs.GetRealServers(item.VirtualServer)
	if err != nil {
		return false, fmt.Errorf("listing real servers of %s: %w", item.VirtualServer, err)
	}
	for _, rs := range rss {
		if !item.RealServer.Equal(rs) {
			continue
		}
		if utilipvs.IsRsGracefulTerminationNeeded(item.VirtualServer.Protocol) && rs.ActiveConn+rs.InactiveConn != 0 {
			klog.Background().V(5).Info("Skip deleting real server till all connection have expired", "realServer", item,
				"activeConnection", rs.ActiveConn, "inactiveConnection", rs.InactiveConn)
			return false, nil
		}
		if err := m.ipvs.DeleteRealServer(item.VirtualServer, rs); err != nil {
			return false, fmt.Errorf("deleting real server %s: %w", item, err)
		}
		return true, nil
	}
	return true, fmt.Errorf("real server %s not found", item)
}

// tryDeleteRs deletes every listed real server that has drained.
func (m *GracefulTerminationManager) tryDeleteRs() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, item := range m.list {
		deleted, err := m.tryDelete(item)
		if err != nil {
			klog.Background().Error(err, "Error in deleting real server", "realServer", name)
		}
		if deleted {
			klog.Background().Info("Removed real server from graceful delete real server list", "realServer", name)
			delete(m.list, name)
		}
	}
}

// MoveRSOutofGracefulDeleteList deletes a draining real server at once (its
// endpoint is back, and is re-added with its weight) and forgets it.
func (m *GracefulTerminationManager) MoveRSOutofGracefulDeleteList(uniqueRS string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	item, ok := m.list[uniqueRS]
	if !ok {
		return fmt.Errorf("real server %q is not in the graceful termination list", uniqueRS)
	}
	if err := m.ipvs.DeleteRealServer(item.VirtualServer, item.RealServer); err != nil {
		return fmt.Errorf("deleting real server %q: %w", uniqueRS, err)
	}
	delete(m.list, uniqueRS)
	return nil
}

// Run checks the draining real servers once a minute, forever.
func (m *GracefulTerminationManager) Run() {
	go m.run(nil)
}

// run is Run until stop is closed (nil: never).
func (m *GracefulTerminationManager) run(stop <-chan struct{}) {
	t := m.clock.NewTicker(rsCheckDeleteInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			m.tryDeleteRs()
		case <-stop:
			return
		}
	}
}

func (m *GracefulTerminationManager) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.list)
}
