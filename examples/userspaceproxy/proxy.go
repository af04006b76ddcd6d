//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// DefaultInterface is the dummy interface service addresses are added to.
const DefaultInterface = "kube-userspace0"

// Options configure a Proxy.
type Options struct {
	// Interface is the dummy interface to hold service addresses; it is created if
	// missing and its addresses are owned by the Proxy. Empty means addresses are not
	// managed: every service address must already be local (tests on 127.0.0.0/8).
	Interface string
	// DialTimeout bounds each attempt to reach an endpoint; 2s when 0.
	DialTimeout time.Duration
	// UDPIdleTimeout ends a UDP flow without traffic; 30s when 0.
	UDPIdleTimeout time.Duration
}

// Proxy is a backend.FullState that forwards service traffic in user space.
type Proxy struct {
	opts Options

	mu        sync.Mutex
	listeners map[listenKey]*listener
	links     *linkAddrs
}

var _ backend.FullState = &Proxy{}

// listenKey is one address a service is reached on.
type listenKey struct {
	proto localnode.Protocol
	addr  netip.AddrPort
}

func (k listenKey) String() string { return string(k.proto) + " " + k.addr.String() }

// targets is where a listener sends new connections. It is replaced, never modified, when
// the service changes, so connections read it without locks.
type targets struct {
	service  string
	eps      []netip.AddrPort
	affinity time.Duration
	// hasAny distinguishes "no endpoints at all" (reject at once) from "none this node may
	// use" (drop); both end the connection here, which user space cannot tell apart.
	hasAny bool
}

func (t *targets) equal(o *targets) bool {
	if t.service != o.service || t.affinity != o.affinity || t.hasAny != o.hasAny || len(t.eps) != len(o.eps) {
		return false
	}
	for i := range t.eps {
		if t.eps[i] != o.eps[i] {
			return false
		}
	}
	return true
}

// New returns a Proxy; it listens on nothing until its first Sync.
func New(opts Options) *Proxy {
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 2 * time.Second
	}
	if opts.UDPIdleTimeout == 0 {
		opts.UDPIdleTimeout = 30 * time.Second
	}
	p := &Proxy{opts: opts, listeners: map[listenKey]*listener{}}
	if opts.Interface != "" {
		p.links = &linkAddrs{name: opts.Interface}
	}
	return p
}

// Sync implements backend.FullState: it makes the listeners and interface addresses of
// state's family match state. It is idempotent, so a retry after an error repairs what
// failed.
func (p *Proxy) Sync(ctx context.Context, state *localnode.State) error {
	logger := klog.FromContext(ctx)
	want := desired(logger, state)
	p.mu.Lock()
	defer p.mu.Unlock()

	var errs []error
	if p.links != nil {
		addrs := map[netip.Addr]bool{}
		for k := range want {
			addrs[k.addr.Addr()] = true
		}
		// Addresses are added before listening (binding needs them) and removed after the
		// listeners on them are closed, below.
		if err := p.links.ensure(state.Family, addrs, false); err != nil {
			errs = append(errs, err)
		}
	}
	for k, t := range want {
		if l := p.listeners[k]; l != nil {
			if !l.targets.Load().equal(t) {
				l.targets.Store(t)
				logger.V(2).Info("Updated service endpoints", "listener", k.String(), "service", t.service, "endpoints", len(t.eps))
			}
			continue
		}
		l, err := listen(k, t, p.opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("service %s: listening on %s: %w", t.service, k, err))
			continue
		}
		p.listeners[k] = l
		logger.Info("Listening for service", "listener", k.String(), "service", t.service, "endpoints", len(t.eps))
	}
	for k, l := range p.listeners {
		if familyOf(k.addr.Addr()) != state.Family {
			continue
		}
		if _, ok := want[k]; !ok {
			l.close()
			delete(p.listeners, k)
			logger.Info("Stopped listening for service", "listener", k.String(), "service", l.targets.Load().service)
		}
	}
	if p.links != nil {
		addrs := map[netip.Addr]bool{}
		for k := range want {
			addrs[k.addr.Addr()] = true
		}
		if err := p.links.ensure(state.Family, addrs, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close stops every listener, ends their connections and removes the service addresses.
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, l := range p.listeners {
		l.close()
		delete(p.listeners, k)
	}
	if p.links == nil {
		return nil
	}
	return errors.Join(
		p.links.ensure(localnode.IPv4, nil, true),
		p.links.ensure(localnode.IPv6, nil, true),
	)
}

// desired lists the addresses to listen on and where each sends traffic: the cluster IP
// to the internal endpoints, external IPs and load-balancer VIPs to the external ones.
func desired(logger klog.Logger, state *localnode.State) map[listenKey]*targets {
	want := map[listenKey]*targets{}
	add := func(svc *localnode.Service, ip netip.Addr, eps []localnode.Endpoint) {
		k := listenKey{proto: svc.Name.Protocol, addr: netip.AddrPortFrom(ip, svc.Port)}
		if prev, dup := want[k]; dup {
			logger.Error(nil, "Two services share an address; keeping the first", "listener", k.String(),
				"kept", prev.service, "skipped", svc.Name.String())
			return
		}
		t := &targets{service: svc.Name.String(), hasAny: svc.HasAnyEndpoints}
		if svc.SessionAffinity == localnode.AffinityClientIP {
			t.affinity = svc.AffinityTimeout
		}
		for _, ep := range eps {
			t.eps = append(t.eps, ep.AddrPort())
		}
		want[k] = t
	}
	for i := range state.Services {
		svc := &state.Services[i]
		if svc.Name.Protocol != localnode.TCP && svc.Name.Protocol != localnode.UDP {
			logger.V(2).Info("Skipping service of a protocol user space cannot proxy", "service", svc.Name.String())
			continue
		}
		add(svc, svc.ClusterIP, svc.InternalEndpoints())
		if len(svc.ExternalIPs)+len(svc.LoadBalancerVIPs) > 0 {
			ext := svc.ExternalEndpoints()
			for _, ip := range svc.ExternalIPs {
				add(svc, ip, ext)
			}
			for _, ip := range svc.LoadBalancerVIPs {
				add(svc, ip, ext)
			}
		}
	}
	return want
}

func familyOf(a netip.Addr) localnode.Family {
	if a.Is4() {
		return localnode.IPv4
	}
	return localnode.IPv6
}

// listener is one bound socket with its current targets.
type listener struct {
	key     listenKey
	opts    Options
	targets atomic.Pointer[targets]
	next    atomic.Uint64

	affMu    sync.Mutex
	affinity map[netip.Addr]sticky

	closing chan struct{}
	closeFn func()
	wg      sync.WaitGroup
}

type sticky struct {
	ep   netip.AddrPort
	last time.Time
}

func listen(k listenKey, t *targets, opts Options) (*listener, error) {
	l := &listener{key: k, opts: opts, affinity: map[netip.Addr]sticky{}, closing: make(chan struct{})}
	l.targets.Store(t)
	var err error
	switch k.proto {
	case localnode.TCP:
		err = l.startTCP()
	case localnode.UDP:
		err = l.startUDP()
	default:
		err = fmt.Errorf("protocol %s not supported", k.proto)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// close stops accepting, ends every forwarded connection and waits for their goroutines.
func (l *listener) close() {
	close(l.closing)
	l.closeFn()
	l.wg.Wait()
}

// pick chooses the endpoint for a new connection from client, skipping tried ones: the
// client's sticky endpoint while affinity lasts and it is still a target, otherwise the
// next in round-robin order.
func (l *listener) pick(t *targets, client netip.Addr, tried map[netip.AddrPort]bool) (netip.AddrPort, bool) {
	if len(t.eps) == 0 || len(tried) >= len(t.eps) {
		return netip.AddrPort{}, false
	}
	now := time.Now()
	if t.affinity > 0 {
		l.affMu.Lock()
		s, ok := l.affinity[client]
		l.affMu.Unlock()
		if ok && now.Sub(s.last) < t.affinity && !tried[s.ep] && contains(t.eps, s.ep) {
			l.remember(client, s.ep, now)
			return s.ep, true
		}
	}
	for range t.eps {
		ep := t.eps[int(l.next.Add(1)-1)%len(t.eps)]
		if tried[ep] {
			continue
		}
		if t.affinity > 0 {
			l.remember(client, ep, now)
		}
		return ep, true
	}
	return netip.AddrPort{}, false
}

func (l *listener) remember(client netip.Addr, ep netip.AddrPort, now time.Time) {
	l.affMu.Lock()
	defer l.affMu.Unlock()
	l.affinity[client] = sticky{ep: ep, last: now}
	// Forget expired clients now and then so the table stays the size of the active set.
	if len(l.affinity) > 1024 {
		timeout := l.targets.Load().affinity
		for c, s := range l.affinity {
			if now.Sub(s.last) >= timeout {
				delete(l.affinity, c)
			}
		}
	}
}

func contains(eps []netip.AddrPort, ep netip.AddrPort) bool {
	for _, e := range eps {
		if e == ep {
			return true
		}
	}
	return false
}
