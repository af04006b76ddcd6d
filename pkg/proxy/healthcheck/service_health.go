package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// ServiceHealthServer serves the healthCheckNodePort of every Service with
// externalTrafficPolicy=Local, answering 200 while the node has local
// endpoints for it and kube-proxy is healthy, 503 otherwise.
type ServiceHealthServer interface {
	// SyncServices makes the set of served Services (and their ports) equal
	// to newServices, opening and closing listeners as needed. Listen
	// failures are reported as events and retried on the next call.
	SyncServices(newServices map[types.NamespacedName]uint16) error
	// SyncEndpoints sets the local endpoint count of each served Service;
	// served Services missing from newEndpoints get 0.
	SyncEndpoints(newEndpoints map[types.NamespacedName]int) error
}

// proxyHealthChecker is what the per-Service answers consult for
// "serviceProxyHealthy"; *ProxyHealthServer satisfies it.
type proxyHealthChecker interface {
	Health() ProxyHealth
}

// alwaysHealthy stands in for a missing proxy health server: embedders and
// tests build proxiers without one, and a probe must then report the
// Service's endpoints rather than crash the handler on a nil receiver.
type alwaysHealthy struct{}

func (alwaysHealthy) Health() ProxyHealth { return ProxyHealth{Healthy: true} }

// orAlwaysHealthy returns hc, or alwaysHealthy when hc is nil, including a
// nil *ProxyHealthServer inside the interface (what a caller passing its
// optional healthz server straight through hands in).
func orAlwaysHealthy(hc proxyHealthChecker) proxyHealthChecker {
	if hc == nil {
		return alwaysHealthy{}
	}
	if hs, ok := hc.(*ProxyHealthServer); ok && hs == nil {
		return alwaysHealthy{}
	}
	return hc
}

// NewServiceHealthServer returns a ServiceHealthServer for one IP family.
// It listens on the node's addresses within nodePortAddresses (or on the
// family's wildcard address when they match everything). recorder may be nil.
func NewServiceHealthServer(nodeName string, recorder events.EventRecorder, nodePortAddresses *proxyutil.NodePortAddresses, healthzServer proxyHealthChecker, serviceFamily v1.IPFamily) ServiceHealthServer {
	return newServiceHealthServer(nodeName, recorder, netListener{}, stdHTTPServers{}, proxyutil.RealNetwork{}, nodePortAddresses, healthzServer, serviceFamily)
}

func newServiceHealthServer(nodeName string, recorder events.EventRecorder, l listener, f httpServerFactory,
	nw proxyutil.NetworkInterfacer, nodePortAddresses *proxyutil.NodePortAddresses, healthzServer proxyHealthChecker,
	serviceFamily v1.IPFamily) ServiceHealthServer {

	var ips []net.IP
	var network string
	switch serviceFamily {
	case v1.IPv4Protocol:
		ips, network = []net.IP{net.IPv4zero}, "tcp4"
	case v1.IPv6Protocol:
		ips, network = []net.IP{net.IPv6zero}, "tcp6"
	default:
		ips, network = []net.IP{net.IPv4zero}, "tcp"
	}
	if nodePortAddresses != nil && !nodePortAddresses.MatchAll() {
		found, err := nodePortAddresses.GetNodeIPs(nw)
		if err != nil {
			klog.ErrorS(err, "Failed to get node IPs matching node port addresses; health check ports will listen on all addresses",
				"nodePortAddresses", nodePortAddresses)
		} else {
			// An empty result is kept deliberately: listening on the wildcard
			// would expose health checks on addresses the admin excluded.
			ips = found
		}
	}
	return &serviceHealthServer{
		nodeName:      nodeName,
		recorder:      recorder,
		listener:      l,
		httpServers:   f,
		healthzServer: orAlwaysHealthy(healthzServer),
		nodeIPs:       ips,
		network:       network,
		services:      map[types.NamespacedName]*hcInstance{},
	}
}

type serviceHealthServer struct {
	nodeName      string
	recorder      events.EventRecorder
	listener      listener
	httpServers   httpServerFactory
	healthzServer proxyHealthChecker
	nodeIPs       []net.IP
	network       string

	mu       sync.RWMutex
	services map[types.NamespacedName]*hcInstance
}

type hcInstance struct {
	nsn       types.NamespacedName
	port      uint16
	servers   []httpServer
	endpoints int
}

func (s *serviceHealthServer) SyncServices(newServices map[types.NamespacedName]uint16) error {
	s.mu.Lock()
	defer s.mu.Unlock()

	for nsn, inst := range s.services {
		if port, ok := newServices[nsn]; ok && port == inst.port {
			continue
		}
		klog.V(2).InfoS("Closing healthcheck", "service", nsn, "port", inst.port)
		inst.closeAll()
		delete(s.services, nsn)
	}

	for nsn, port := range newServices {
		if s.services[nsn] != nil {
			klog.V(3).InfoS("Existing healthcheck", "service", nsn, "port", port)
			continue
		}
		klog.V(2).InfoS("Opening healthcheck", "service", nsn, "port", port)
		inst := &hcInstance{nsn: nsn, port: port}
		if err := s.listenAndServe(inst); err != nil {
			msg := fmt.Sprintf("node %s failed to start healthcheck %q on port %d: %v", s.nodeName, nsn.String(), port, err)
			if s.recorder != nil {
				s.recorder.Eventf(&v1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: nsn.Namespace, Name: nsn.Name},
					nil, v1.EventTypeWarning, "FailedToStartServiceHealthcheck", "Listen", "%s", msg)
			}
			klog.ErrorS(err, "Failed to start healthcheck", "node", s.nodeName, "service", nsn, "port", port)
			continue
		}
		s.services[nsn] = inst
	}
	return nil
}

// listenAndServe opens one listener per node IP; on any failure it closes
// what it opened, so a Service is either fully served or not at all.
func (s *serviceHealthServer) listenAndServe(inst *hcInstance) error {
	port := strconv.Itoa(int(inst.port))
	for _, ip := range s.nodeIPs {
		addr := net.JoinHostPort(ip.String(), port)
		l, err := s.listener.Listen(context.Background(), s.network, addr)
		if err != nil {
			inst.closeAll()
			return err
		}
		srv := s.httpServers.New(hcHandler{nsn: inst.nsn, server: s})
		inst.servers = append(inst.servers, srv)
		go func() {
			klog.V(3).InfoS("Starting goroutine for healthcheck", "service", inst.nsn, "address", l.Addr())
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "Healthcheck closed", "service", inst.nsn, "address", l.Addr())
				return
			}
			klog.V(3).InfoS("Healthcheck closed", "service", inst.nsn, "address", l.Addr())
		}()
	}
	return nil
}

func (inst *hcInstance) closeAll() {
	for _, srv := range inst.servers {
		if err := srv.Close(); err != nil {
			klog.ErrorS(err, "Error closing server for health check service", "service", inst.nsn)
		}
	}
	inst.servers = nil
}

func (s *serviceHealthServer) SyncEndpoints(newEndpoints map[types.NamespacedName]int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for nsn, inst := range s.services {
		count := newEndpoints[nsn]
		klog.V(3).InfoS("Reporting endpoints for healthcheck", "endpointCount", count, "service", nsn)
		inst.endpoints = count
	}
	return nil
}

type hcHandler struct {
	nsn    types.NamespacedName
	server *serviceHealthServer
}

var _ http.Handler = hcHandler{}

func (h hcHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.server.mu.RLock()
	inst, ok := h.server.services[h.nsn]
	count := 0
	if ok {
		count = inst.endpoints
	}
	h.server.mu.RUnlock()
	if !ok {
		// A probe raced with closing this Service's server: tell the load
		// balancer not to use the node rather than answering 200 with nothing.
		klog.ErrorS(nil, "Received request for closed healthcheck", "service", h.nsn)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}

	proxyHealthy := h.server.healthzServer.Health().Healthy
	setJSONHeaders(w.Header())
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
	if count > 0 && proxyHealthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	// Same bytes as upstream (tab-indented, no trailing newline), since some
	// probers compare bodies.
	fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
		h.nsn.Namespace, h.nsn.Name, count, proxyHealthy)
}

// FakeServiceHealthServer is a ServiceHealthServer that does nothing.
type FakeServiceHealthServer struct{}

// NewFakeServiceHealthServer returns a FakeServiceHealthServer.
func NewFakeServiceHealthServer() ServiceHealthServer {
	return FakeServiceHealthServer{}
}

// SyncServices implements ServiceHealthServer.
func (FakeServiceHealthServer) SyncServices(_ map[types.NamespacedName]uint16) error { return nil }

// SyncEndpoints implements ServiceHealthServer.
func (FakeServiceHealthServer) SyncEndpoints(_ map[types.NamespacedName]int) error { return nil }
