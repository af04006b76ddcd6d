package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	basemetrics "k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/kube-proxy/pkg/proxy/metrics"
)

// ToBeDeletedTaint is the taint the cluster autoscaler puts on a node it is
// about to remove; load balancers should stop sending traffic there.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// ProxierHealth is the health of the proxier for one IP family.
type ProxierHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// ProxyHealth is the JSON body of /healthz and /livez.
type ProxyHealth struct {
	// LastUpdated is the latest successful sync of any family (the current
	// time in a healthy HTTP answer, for compatibility with old clients).
	LastUpdated time.Time `json:"lastUpdated"`
	CurrentTime time.Time `json:"currentTime"`
	// NodeEligible is set only in /healthz answers.
	NodeEligible *bool `json:"nodeEligible,omitempty"`
	// Healthy is true when every family is healthy.
	Healthy bool                          `json:"healthy"`
	Status  map[v1.IPFamily]ProxierHealth `json:"status,omitempty"`
}

// nodeManager supplies the current Node; *proxy.NodeManager satisfies it.
// An interface avoids importing pkg/proxy.
type nodeManager interface {
	Node() *v1.Node
}

// ProxyHealthServer tracks whether the proxiers keep up with changes and
// serves that on /healthz (which also requires the node to be eligible for
// traffic) and /livez.
type ProxyHealthServer struct {
	listener      listener
	httpServers   httpServerFactory
	clock         clock.Clock
	nodeManager   nodeManager
	addr          string
	healthTimeout time.Duration

	mu sync.RWMutex
	// lastUpdated is the time of each family's last successful sync.
	lastUpdated map[v1.IPFamily]time.Time
	// oldestQueued is, per family, the first change queued since the last
	// successful sync.
	oldestQueued map[v1.IPFamily]time.Time
}

// NewProxyHealthServer returns a server for addr ("host:port"). A family is
// unhealthy once a queued change has waited longer than healthTimeout for a
// sync. nodeManager may be a zero-value *proxy.NodeManager.
func NewProxyHealthServer(addr string, healthTimeout time.Duration, nodeManager nodeManager) *ProxyHealthServer {
	return newProxyHealthServer(netListener{}, stdHTTPServers{}, clock.RealClock{}, addr, healthTimeout, nodeManager)
}

func newProxyHealthServer(l listener, f httpServerFactory, c clock.Clock, addr string, healthTimeout time.Duration, nm nodeManager) *ProxyHealthServer {
	return &ProxyHealthServer{
		listener:      l,
		httpServers:   f,
		clock:         c,
		nodeManager:   nm,
		addr:          addr,
		healthTimeout: healthTimeout,
		lastUpdated:   map[v1.IPFamily]time.Time{},
		oldestQueued:  map[v1.IPFamily]time.Time{},
	}
}

// Updated records that ipFamily's proxier has just synced successfully.
func (hs *ProxyHealthServer) Updated(ipFamily v1.IPFamily) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	delete(hs.oldestQueued, ipFamily)
	hs.lastUpdated[ipFamily] = hs.clock.Now()
}

// QueuedUpdate records that ipFamily's proxier has a change waiting to be
// synced. Only the oldest pending change matters for health.
func (hs *ProxyHealthServer) QueuedUpdate(ipFamily v1.IPFamily) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if _, pending := hs.oldestQueued[ipFamily]; !pending {
		hs.oldestQueued[ipFamily] = hs.clock.Now()
	}
}

// Health reports the proxiers' health. A family that has never synced counts
// as healthy (it is still starting up); one that has synced is unhealthy once
// its oldest queued change is healthTimeout old.
func (hs *ProxyHealthServer) Health() ProxyHealth {
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	now := hs.clock.Now()
	h := ProxyHealth{
		CurrentTime: now,
		Healthy:     true,
		Status:      make(map[v1.IPFamily]ProxierHealth, len(hs.lastUpdated)),
	}
	for fam, last := range hs.lastUpdated {
		if last.After(h.LastUpdated) {
			h.LastUpdated = last
		}
		healthy := true
		if queued, pending := hs.oldestQueued[fam]; pending && now.Sub(queued) >= hs.healthTimeout {
			healthy = false
			h.Healthy = false
		}
		h.Status[fam] = ProxierHealth{LastUpdated: last, Healthy: healthy}
	}
	return h
}

// NodeEligible reports whether load balancers should send traffic to this
// node: the node is known, not being deleted, and not tainted
// ToBeDeletedByClusterAutoscaler.
func (hs *ProxyHealthServer) NodeEligible() bool {
	if hs.nodeManager == nil {
		return false
	}
	node := hs.nodeManager.Node()
	if node == nil || node.DeletionTimestamp != nil {
		return false
	}
	for _, t := range node.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return false
		}
	}
	return true
}

// Run serves /healthz and /livez on the configured address until ctx is
// cancelled (then it returns nil) or serving fails.
func (hs *ProxyHealthServer) Run(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", hs.serveHealthz)
	mux.HandleFunc("/livez", hs.serveLivez)
	srv := hs.httpServers.New(mux)

	l, err := hs.listener.Listen(ctx, "tcp", hs.addr)
	if err != nil {
		return fmt.Errorf("failed to start proxy healthz on %s: %w", hs.addr, err)
	}
	logger := klog.FromContext(ctx)
	logger.V(3).Info("Starting healthz HTTP server", "address", hs.addr)

	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			if err := srv.Close(); err != nil {
				logger.Error(err, "Failed to close healthz HTTP server", "address", hs.addr)
			}
		case <-stopped:
		}
	}()

	err = srv.Serve(l)
	if ctx.Err() != nil && (err == nil || errors.Is(err, http.ErrServerClosed)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("proxy healthz on %s closed with error: %w", hs.addr, err)
	}
	return nil
}

func (hs *ProxyHealthServer) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	h := hs.Health()
	eligible := hs.NodeEligible()
	h.NodeEligible = &eligible
	hs.respond(w, h, h.Healthy && eligible, metrics.ProxyHealthzTotal)
}

func (hs *ProxyHealthServer) serveLivez(w http.ResponseWriter, _ *http.Request) {
	h := hs.Health()
	hs.respond(w, h, h.Healthy, metrics.ProxyLivezTotal)
}

func (hs *ProxyHealthServer) respond(w http.ResponseWriter, h ProxyHealth, ok bool, counter *basemetrics.CounterVec) {
	code := http.StatusServiceUnavailable
	if ok {
		code = http.StatusOK
		// Old clients read lastUpdated as "the sync loop is alive", which a
		// healthy answer vouches for.
		h.LastUpdated = hs.clock.Now()
	}
	counter.WithLabelValues(strconv.Itoa(code)).Inc()
	setJSONHeaders(w.Header())
	w.WriteHeader(code)
	body, err := json.Marshal(h)
	if err != nil {
		klog.ErrorS(err, "Failed to encode proxy health")
		return
	}
	_, _ = w.Write(body)
}
