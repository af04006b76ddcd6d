package winkernel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
)

// epState is an HNS endpoint some load balancer of ours references.
type epState struct {
	id string
	// owned: a remote endpoint, which kube-proxy creates and so deletes
	// once nothing references it. Local endpoints belong to the CNI plugin.
	owned bool
	refs  int
}

// lbState is an HNS load balancer of one service port.
type lbState struct {
	id   string
	want *hcnapi.LoadBalancer // what it was created (or updated) as
}

// portState is what one service port has in HNS.
type portState struct {
	lbs map[lbRole]*lbState
	// endpoints are the IPs whose epState this port holds a reference on.
	endpoints []string
}

// lbOwner locates a load balancer in the view.
type lbOwner struct {
	port proxy.ServicePortName
	role lbRole
}

// hnsBackend is the proxier's syncshell.Backend: it keeps the authoritative
// view of what it created in HNS (IDs by service port and role), plans each
// changed service port with planService and applies the difference. Only
// Sync and RulesMissing touch it, and the Shell never runs them
// concurrently.
type hnsBackend struct {
	hcn         hcnapi.Interface
	family      v1.IPFamily
	networkName string
	hostMAC     string
	rootHnsEP   string
	cfg         planConfig
	features    hcnapi.Features
	local       *localnode.Computer
	logger      klog.Logger
	// staleRetry is how soon a sync is asked for while stale load
	// balancers wait for deletion.
	staleRetry time.Duration

	network   *hcnapi.Network // nil until a full sync found it
	gatewayID string
	forceFull bool

	ports     map[proxy.ServicePortName]*portState
	byService map[types.NamespacedName][]proxy.ServicePortName
	eps       map[string]*epState
	owners    map[string]lbOwner // by load balancer ID
	frontends map[frontendKey]string
	// stale are load balancers whose deletion failed, with their type for
	// the metric; each sync retries at most MAX_COUNT_STALE_LOADBALANCERS.
	stale map[string]loadBalancerType
}

func newHNSBackend(h hcnapi.Interface, family v1.IPFamily, networkName string, cfg planConfig, features hcnapi.Features, hostMAC, rootHnsEP string, logger klog.Logger) *hnsBackend {
	return &hnsBackend{
		hcn:         h,
		family:      family,
		networkName: networkName,
		hostMAC:     hostMAC,
		rootHnsEP:   rootHnsEP,
		cfg:         cfg,
		features:    features,
		local:       localnode.NewComputer(localnode.Family(family)),
		logger:      logger,
		staleRetry:  30 * time.Second,
		ports:       map[proxy.ServicePortName]*portState{},
		byService:   map[types.NamespacedName][]proxy.ServicePortName{},
		eps:         map[string]*epState{},
		owners:      map[string]lbOwner{},
		frontends:   map[frontendKey]string{},
		stale:       map[string]loadBalancerType{},
	}
}

var _ syncshell.Backend = &hnsBackend{}
var _ syncshell.RulesChecker = &hnsBackend{}

// syncRun is one sync's scratch: what HNS was read to hold, lazily.
type syncRun struct {
	full   bool
	wrote  bool
	errs   []error
	listed map[string]*hcnapi.Endpoint     // by IP; nil until listed
	lbs    map[string]*hcnapi.LoadBalancer // of this family, by ID; nil until listed
	// byFrontend indexes lbs (deleted ones stay here; check lbs).
	byFrontend map[frontendKey][]string
	claimed    map[string]bool // listed load balancers adopted this sync
	release    []string        // endpoint IPs whose reference is dropped at the end
	netRead    bool            // the network was re-read this sync
	ctx        context.Context
}

// RulesMissing reports whether the HNS network changed (recreated under a
// new ID, gone, or new remote subnets) since the last full sync: the
// Shell's periodic check, one HNS call, so that a sync without changes
// makes none.
func (b *hnsBackend) RulesMissing(ctx context.Context) bool {
	if b.network == nil {
		return false
	}
	n, err := b.hcn.GetNetworkByName(b.networkName)
	if err != nil {
		b.logger.Info("Cannot read the HNS network; resyncing", "network", b.networkName, "err", err)
		return true
	}
	if n.ID != b.network.ID || !slices.Equal(n.RemoteSubnets, b.network.RemoteSubnets) {
		b.logger.Info("The HNS network changed; resyncing", "network", b.networkName, "oldID", b.network.ID, "newID", n.ID)
		return true
	}
	if b.cfg.forwardHealthCheckVip && b.gatewayID == "" {
		// Health check forwards wait for the root endpoint; look again.
		if _, err := b.hcn.GetEndpointByName(b.rootHnsEP); err == nil {
			b.logger.Info("The root HNS endpoint appeared; resyncing", "name", b.rootHnsEP)
			return true
		}
	}
	return false
}

// Sync implements syncshell.Backend.
func (b *hnsBackend) Sync(ctx context.Context, u *syncshell.Update) (syncshell.Outcome, error) {
	full := u.Full || b.network == nil || b.forceFull
	if !full && len(u.ChangedServices()) == 0 && len(u.RemovedPorts) == 0 && len(b.stale) == 0 {
		return syncshell.Outcome{}, nil
	}
	r := &syncRun{full: full, ctx: ctx}
	var out syncshell.Outcome
	if full {
		out.Full = !u.Full
		if err := b.startFull(r); err != nil {
			return syncshell.Outcome{Full: true, Programmed: r.wrote}, err
		}
		b.forceFull = false
	}

	if full || u.ServicesChanged {
		b.reindex(u.Services)
	}
	var removed []proxy.ServicePortName
	var changed []types.NamespacedName
	if full {
		for name := range b.ports {
			if _, ok := u.Services[name]; !ok {
				removed = append(removed, name)
			}
		}
		changed = slices.Collect(maps.Keys(b.byService))
	} else {
		removed = u.RemovedPorts
		changed = slices.Collect(maps.Keys(u.ChangedServices()))
	}
	for _, name := range removed {
		b.removePort(r, name)
	}
	slices.SortFunc(changed, func(a, b types.NamespacedName) int {
		return strings.Compare(a.String(), b.String())
	})
	for _, svc := range changed {
		b.syncService(r, u, svc)
	}
	b.finish(r)

	out.Programmed = r.wrote
	if len(b.stale) > 0 {
		out.SyncAgainAfter = b.staleRetry
	}
	return out, errors.Join(r.errs...)
}

// startFull re-reads the network, its endpoints and every load balancer,
// and drops from the view whatever HNS no longer has.
func (b *hnsBackend) startFull(r *syncRun) error {
	n, err := b.hcn.GetNetworkByName(b.networkName)
	if hcnapi.IsHNSNotRunning(err) {
		return fmt.Errorf("HNS is not running, cannot read network %q: %w", b.networkName, err)
	}
	if err != nil {
		// The network is gone: whatever was programmed points at endpoints
		// that went with it. Forget it all; when the network is back the
		// next full sync reprograms and sweeps the old load balancers.
		b.reset()
		return fmt.Errorf("HNS network %q not found (check the CNI deployment): %w", b.networkName, err)
	}
	if b.network != nil && n.ID != b.network.ID {
		b.logger.Info("The HNS network was recreated; reprogramming every service", "network", b.networkName, "oldID", b.network.ID, "newID", n.ID)
		b.reset()
	}
	b.setNetwork(n)
	r.netRead = true

	if err := b.listEndpoints(r); err != nil {
		return err
	}
	if err := b.listLBs(r); err != nil {
		return fmt.Errorf("listing HNS load balancers: %w", err)
	}
	r.claimed = map[string]bool{}
	// Load balancers removed behind our back are created again.
	for _, ps := range b.ports {
		for role, lb := range ps.lbs {
			if r.lbs[lb.id] == nil {
				b.forgetLB(lb.id)
				delete(ps.lbs, role)
			} else {
				r.claimed[lb.id] = true
			}
		}
	}
	// Endpoint IDs are re-read: a pod recreated with the same IP has a new
	// endpoint, and the load balancers must follow.
	gone := map[string]bool{}
	for ip, st := range b.eps {
		if ep := r.listed[ip]; ep == nil || ep.ID != st.id {
			delete(b.eps, ip)
			gone[ip] = true
		}
	}
	if len(gone) > 0 {
		for _, ps := range b.ports {
			ps.endpoints = slices.DeleteFunc(ps.endpoints, func(ip string) bool { return gone[ip] })
		}
	}

	b.gatewayID = ""
	if b.cfg.forwardHealthCheckVip {
		gw, err := b.hcn.GetEndpointByName(b.rootHnsEP)
		if err != nil {
			b.logger.V(2).Info("Root HNS endpoint not found; no health check load balancers", "name", b.rootHnsEP, "err", err)
		} else {
			b.gatewayID = gw.ID
		}
	}
	b.cfg.gateway = b.gatewayID != ""

	if b.cfg.overlay {
		if r.listed[b.cfg.sourceVIP] == nil {
			ep, err := b.hcn.CreateEndpoint(n.ID, &hcnapi.Endpoint{IPs: []string{b.cfg.sourceVIP}, MAC: b.hostMAC})
			r.wrote = true
			if err != nil {
				return fmt.Errorf("creating the source VIP endpoint %s: %w", b.cfg.sourceVIP, err)
			}
			r.listed[b.cfg.sourceVIP] = ep
			b.logger.V(3).Info("Created the source VIP endpoint", "ip", b.cfg.sourceVIP, "hnsID", ep.ID)
		}
	}
	return nil
}

// reset forgets everything programmed (its HNS objects are gone or will be
// swept).
func (b *hnsBackend) reset() {
	b.network = nil
	clear(b.ports)
	clear(b.eps)
	clear(b.owners)
	clear(b.frontends)
}

func (b *hnsBackend) setNetwork(n *hcnapi.Network) {
	b.network = n
	b.cfg.overlay = n.IsOverlay()
	subnets, err := parseRemoteSubnets(n)
	if err != nil {
		b.logger.Error(err, "Ignoring unparsable remote subnet policies")
	}
	b.cfg.subnets = subnets
}

// listEndpoints reads the network's endpoints into r.listed, by IP of this
// family. Windows Server 2019 can show a local and a remote endpoint with
// the same IP: the local one wins and the remote one is deleted, as
// upstream.
func (b *hnsBackend) listEndpoints(r *syncRun) error {
	eps, err := b.hcn.ListEndpointsOfNetwork(b.network.ID)
	if err != nil {
		return fmt.Errorf("listing the endpoints of HNS network %q: %w", b.networkName, err)
	}
	r.listed = make(map[string]*hcnapi.Endpoint, len(eps))
	var dups []string
	for i := range eps {
		ep := &eps[i]
		for j, ip := range ep.IPs {
			if j > 1 {
				break
			}
			if !b.ofFamily(ip) {
				continue
			}
			if have := r.listed[ip]; have != nil {
				switch {
				case !ep.Remote && have.Remote:
					dups = append(dups, have.ID)
				case ep.Remote && !have.Remote:
					dups = append(dups, ep.ID)
					continue
				default:
					continue
				}
			}
			r.listed[ip] = ep
		}
	}
	for _, id := range dups {
		b.logger.V(3).Info("Deleting remote endpoint duplicating a local endpoint's IP", "hnsID", id)
		r.wrote = true
		if err := b.hcn.DeleteEndpoint(id); err != nil && !hcnapi.IsNotFound(err) {
			b.logger.Error(err, "Failed to delete remote endpoint with duplicate IP", "hnsID", id)
		}
	}
	return nil
}

func (b *hnsBackend) ofFamily(ip string) bool {
	parsed := net.ParseIP(ip)
	return parsed != nil && (parsed.To4() != nil) == !b.cfg.ipv6
}

// reindex rebuilds the Service -> ports index (only when Services changed,
// so an endpoint change costs O(its Service)).
func (b *hnsBackend) reindex(services proxy.ServicePortMap) {
	clear(b.byService)
	for name := range services {
		b.byService[name.NamespacedName] = append(b.byService[name.NamespacedName], name)
	}
}

// syncService brings every port of one Service in line with its plan.
// Ports are planned together because their health check load balancers
// share a frontend.
func (b *hnsBackend) syncService(r *syncRun, u *syncshell.Update, svc types.NamespacedName) {
	names := slices.Clone(b.byService[svc])
	slices.SortFunc(names, func(a, b proxy.ServicePortName) int {
		return strings.Compare(a.Port+"/"+string(a.Protocol), b.Port+"/"+string(b.Protocol))
	})
	plans := make([]*servicePlan, 0, len(names))
	opts := make([]serviceOptions, 0, len(names))
	kept := names[:0]
	for _, name := range names {
		sp, ok := u.Services[name]
		if !ok {
			continue
		}
		ln, ok := b.local.ComputeServicePort(r.ctx, name, sp, u.Policy(name))
		if !ok {
			b.removePort(r, name)
			continue
		}
		p := planService(&b.cfg, &ln, optionsOf(sp))
		plans = append(plans, &p)
		opts = append(opts, optionsOf(sp))
		kept = append(kept, name)
	}
	dedupeHealthChecks(plans)
	for i, name := range kept {
		b.applyPort(r, name, plans[i], opts[i])
	}
}

func optionsOf(sp proxy.ServicePort) serviceOptions {
	if si, ok := sp.(*serviceInfo); ok {
		return serviceOptions{preserveDIP: si.preserveDIP, winProxyOptimization: si.winProxyOptimization}
	}
	return serviceOptions{winProxyOptimization: true}
}

// applyPort programs one service port's plan over what it has.
func (b *hnsBackend) applyPort(r *syncRun, name proxy.ServicePortName, p *servicePlan, opts serviceOptions) {
	ps := b.ports[name]
	if ps == nil {
		ps = &portState{lbs: map[lbRole]*lbState{}}
		b.ports[name] = ps
	}
	oldRefs := ps.endpoints
	var refs []string
	ids := make(map[string]string, len(p.endpoints))
	if p.vipEndpoint != "" {
		// Upstream's service VIP endpoint: the cluster IP as a remote
		// endpoint behind this node, so overlay routing knows it.
		if _, err := b.acquire(r, p.vipEndpoint, false, b.hostMAC, b.cfg.nodeIP); err != nil {
			b.logger.Error(err, "Remote endpoint creation failed for service VIP", "servicePortName", name, "ip", p.vipEndpoint)
			r.errs = append(r.errs, fmt.Errorf("service %s: VIP endpoint %s: %w", name, p.vipEndpoint, err))
			ps.endpoints = oldRefs
			return
		}
		refs = append(refs, p.vipEndpoint)
	}
	for _, need := range p.endpoints {
		id, err := b.acquire(r, need.ip, need.local, "", "")
		if err != nil {
			b.logger.Error(err, "Endpoint not programmed", "servicePortName", name, "ip", need.ip)
			if !need.local {
				r.errs = append(r.errs, fmt.Errorf("service %s: endpoint %s: %w", name, need.ip, err))
			}
			continue
		}
		ids[need.ip] = id
		refs = append(refs, need.ip)
	}
	ps.endpoints = refs

	failures := len(r.errs)
	keep := make(map[lbRole]bool, len(p.lbs))
	for i := range p.lbs {
		lb := &p.lbs[i]
		var epIDs []string
		if lb.gateway {
			epIDs = []string{b.gatewayID}
		} else {
			for _, ip := range lb.endpointIPs {
				if id := ids[ip]; id != "" {
					epIDs = append(epIDs, id)
				}
			}
		}
		if len(epIDs) == 0 {
			continue
		}
		keep[lb.role] = true
		b.ensureLB(r, name, ps, lb.role, lb.hcnLoadBalancer(epIDs), opts)
	}
	for role, lb := range ps.lbs {
		if !keep[role] {
			b.deleteLB(r, lb.id, role.kind)
			delete(ps.lbs, role)
		}
	}
	if len(r.errs) > failures {
		// A load balancer kept its old endpoints: keep them referenced
		// until a later sync succeeds, so none is deleted under it.
		ps.endpoints = append(ps.endpoints, oldRefs...)
		return
	}
	r.release = append(r.release, oldRefs...)
}

// acquire returns the HNS endpoint of ip, taking a reference on it;
// creating a remote one if needed (mac and pa override the defaults, for the
// service VIP endpoint).
func (b *hnsBackend) acquire(r *syncRun, ip string, local bool, mac, pa string) (string, error) {
	if st := b.eps[ip]; st != nil {
		st.refs++
		return st.id, nil
	}
	// A full sync has listed the network's endpoints. A partial one lists
	// them only for a local endpoint it does not know (the CNI plugin made
	// it; HNS cannot be asked by address): listing costs as much as the
	// network has endpoints, so a new remote endpoint is created directly,
	// and the list is read only if HNS refuses because one exists.
	if r.listed == nil && local {
		if err := b.listEndpoints(r); err != nil {
			return "", err
		}
	}
	if ep := r.listed[ip]; ep != nil {
		b.eps[ip] = &epState{id: ep.ID, owned: ep.Remote, refs: 1}
		return ep.ID, nil
	}
	if local {
		return "", fmt.Errorf("local endpoint %s not found on network %q", ip, b.networkName)
	}
	want := &hcnapi.Endpoint{IPs: []string{ip}, Remote: true, MAC: mac, ProviderAddress: pa}
	if want.MAC == "" {
		want.MAC = conjureMAC("02-11", net.ParseIP(ip))
	}
	if b.cfg.overlay && want.ProviderAddress == "" {
		want.ProviderAddress = providerAddress(b.cfg.subnets, ip)
		if want.ProviderAddress == "" && !r.netRead {
			// A new node's subnet may not be known yet: re-read the
			// network's remote subnets once per sync, as upstream.
			r.netRead = true
			n, err := b.hcn.GetNetworkByName(b.networkName)
			if err != nil {
				return "", fmt.Errorf("re-reading HNS network %q: %w", b.networkName, err)
			}
			if n.ID != b.network.ID {
				b.forceFull = true
				return "", fmt.Errorf("HNS network %q was recreated", b.networkName)
			}
			b.setNetwork(n)
			want.ProviderAddress = providerAddress(b.cfg.subnets, ip)
		}
		if want.ProviderAddress == "" {
			b.logger.V(2).Info("No provider address for endpoint, assuming a public IP", "ip", ip)
			want.ProviderAddress = b.cfg.nodeIP
		}
	}
	r.wrote = true
	ep, err := b.hcn.CreateEndpoint(b.network.ID, want)
	if err != nil && r.listed == nil {
		// An endpoint with this address may exist (left by an earlier run,
		// or a local one the Service's endpoints were not told about).
		if lerr := b.listEndpoints(r); lerr != nil {
			return "", errors.Join(err, lerr)
		}
		if have := r.listed[ip]; have != nil {
			b.eps[ip] = &epState{id: have.ID, owned: have.Remote, refs: 1}
			return have.ID, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("creating remote endpoint: %w", err)
	}
	b.logger.V(3).Info("Created remote endpoint", "ip", ip, "hnsID", ep.ID)
	if r.listed != nil {
		r.listed[ip] = ep
	}
	b.eps[ip] = &epState{id: ep.ID, owned: true, refs: 1}
	return ep.ID, nil
}

// ensureLB makes the load balancer of (name, role) be want.
func (b *hnsBackend) ensureLB(r *syncRun, name proxy.ServicePortName, ps *portState, role lbRole, want *hcnapi.LoadBalancer, opts serviceOptions) {
	prev := ps.lbs[role]
	if prev != nil && sameLoadBalancer(prev.want, want) {
		return
	}
	if prev == nil && r.full {
		// Adopt an identical load balancer a previous run left.
		fk, _ := frontendOf(want)
		for _, id := range r.byFrontend[fk] {
			if have := r.lbs[id]; have != nil && !r.claimed[id] && sameLoadBalancer(have, want) {
				r.claimed[id] = true
				b.recordLB(name, ps, role, id, want)
				return
			}
		}
	}
	family := string(b.family)
	if prev != nil && b.features.ModifyLoadbalancer && opts.winProxyOptimization {
		r.wrote = true
		got, err := b.hcn.UpdateLoadBalancer(prev.id, want)
		switch {
		case err == nil:
			b.forgetLB(prev.id)
			b.recordLB(name, ps, role, got.ID, want)
			return
		case hcnapi.IsNotImplemented(err):
			b.logger.Info("Updating HNS load balancers is not implemented; deleting and re-creating them from now on", "hnsID", prev.id)
			b.features.ModifyLoadbalancer = false
		default:
			metrics.WinKernelLBUpdateFailure.WithLabelValues(family, string(role.kind), classifyLBError(err)).Inc()
			b.logger.Error(err, "Updating HNS load balancer failed", "servicePortName", name, "lbType", role.kind, "hnsID", prev.id)
			r.errs = append(r.errs, fmt.Errorf("service %s: updating %s load balancer %s: %w", name, role.kind, prev.id, err))
			return
		}
	}
	if prev != nil {
		b.deleteLB(r, prev.id, role.kind)
		delete(ps.lbs, role)
	}
	got, err := b.createOrReplace(r, want)
	if err != nil {
		metrics.WinKernelLBCreateFailure.WithLabelValues(family, string(role.kind), classifyLBError(err)).Inc()
		b.logger.Error(err, "Creating HNS load balancer failed", "servicePortName", name, "lbType", role.kind, "vip", want.VIP())
		r.errs = append(r.errs, fmt.Errorf("service %s: creating %s load balancer: %w", name, role.kind, err))
		return
	}
	b.logger.V(3).Info("Created HNS load balancer", "servicePortName", name, "lbType", role.kind, "vip", want.VIP(), "hnsID", got.ID)
	b.recordLB(name, ps, role, got.ID, want)
}

// createOrReplace creates lb; if HNS says its frontend is taken and exactly
// one load balancer we know of has that frontend, that one is deleted and
// the creation retried (upstream's path for "already exists").
func (b *hnsBackend) createOrReplace(r *syncRun, lb *hcnapi.LoadBalancer) (*hcnapi.LoadBalancer, error) {
	r.wrote = true
	got, err := b.hcn.CreateLoadBalancer(lb)
	if !IsPolicyAlreadyExists(err) {
		return got, err
	}
	fk, _ := frontendOf(lb)
	id := b.frontends[fk]
	if id == "" {
		if r.lbs == nil {
			if lerr := b.listLBs(r); lerr != nil {
				return nil, errors.Join(err, lerr)
			}
		}
		for _, lid := range r.byFrontend[fk] {
			if r.lbs[lid] == nil {
				continue
			}
			if id != "" {
				b.logger.Info("More than one load balancer has the frontend; not deleting any", "vip", fk.vip, "port", fk.port)
				return nil, err
			}
			id = lid
		}
	}
	if id == "" {
		return nil, err
	}
	b.logger.V(4).Info("Deleting the load balancer holding the frontend and retrying", "hnsID", id, "vip", fk.vip, "port", fk.port)
	if derr := b.hcn.DeleteLoadBalancer(id); derr != nil && !hcnapi.IsNotFound(derr) {
		return nil, errors.Join(err, derr)
	}
	owner, owned := b.owners[id]
	b.forgetLB(id)
	if ps := b.ports[owner.port]; owned && ps != nil {
		delete(ps.lbs, owner.role)
	}
	if r.lbs != nil {
		delete(r.lbs, id)
	}
	return b.hcn.CreateLoadBalancer(lb)
}

func (b *hnsBackend) listLBs(r *syncRun) error {
	lbs, err := b.hcn.ListLoadBalancers()
	if err != nil {
		return err
	}
	r.lbs = make(map[string]*hcnapi.LoadBalancer, len(lbs))
	r.byFrontend = make(map[frontendKey][]string, len(lbs))
	for i := range lbs {
		if lbs[i].IsIPv6() != b.cfg.ipv6 {
			continue
		}
		r.lbs[lbs[i].ID] = &lbs[i]
		if fk, ok := frontendOf(&lbs[i]); ok {
			r.byFrontend[fk] = append(r.byFrontend[fk], lbs[i].ID)
		}
	}
	return nil
}

func (b *hnsBackend) recordLB(name proxy.ServicePortName, ps *portState, role lbRole, id string, want *hcnapi.LoadBalancer) {
	ps.lbs[role] = &lbState{id: id, want: want}
	b.owners[id] = lbOwner{port: name, role: role}
	if fk, ok := frontendOf(want); ok {
		b.frontends[fk] = id
	}
}

func (b *hnsBackend) forgetLB(id string) {
	owner, ok := b.owners[id]
	if !ok {
		return
	}
	delete(b.owners, id)
	if ps := b.ports[owner.port]; ps != nil {
		if lb := ps.lbs[owner.role]; lb != nil {
			if fk, ok := frontendOf(lb.want); ok && b.frontends[fk] == id {
				delete(b.frontends, fk)
			}
		}
	}
}

// deleteLB deletes a load balancer; one that is already gone counts as
// deleted. A failure queues it as stale, to be retried by later syncs.
func (b *hnsBackend) deleteLB(r *syncRun, id string, kind loadBalancerType) {
	b.forgetLB(id)
	r.wrote = true
	if err := b.deleteLoadBalancer(id); err != nil {
		metrics.WinKernelLBDeleteFailure.WithLabelValues(string(b.family), string(kind), classifyLBError(err)).Inc()
		b.logger.Error(err, "Deleting HNS load balancer failed; queued as stale", "hnsID", id, "lbType", kind)
		b.stale[id] = kind
	}
}

// deleteLoadBalancer is HNS deletion with upstream's single retry.
func (b *hnsBackend) deleteLoadBalancer(id string) error {
	err := b.hcn.DeleteLoadBalancer(id)
	if err == nil || hcnapi.IsNotFound(err) {
		return nil
	}
	if IsHnsNotRunningError(err) {
		return err
	}
	err = b.hcn.DeleteLoadBalancer(id)
	if err == nil || hcnapi.IsNotFound(err) {
		return nil
	}
	return err
}

// removePort deletes a service port's load balancers and drops its
// endpoint references.
func (b *hnsBackend) removePort(r *syncRun, name proxy.ServicePortName) {
	ps := b.ports[name]
	if ps == nil {
		return
	}
	for _, role := range slices.SortedFunc(maps.Keys(ps.lbs), compareRoles) {
		b.deleteLB(r, ps.lbs[role].id, role.kind)
	}
	r.release = append(r.release, ps.endpoints...)
	delete(b.ports, name)
}

// finish drops released endpoint references, deleting remote endpoints
// nothing uses any more, sweeps (on a full sync) load balancers of this
// family that no service port claims, and retries stale deletions.
func (b *hnsBackend) finish(r *syncRun) {
	for _, ip := range r.release {
		st := b.eps[ip]
		if st == nil {
			continue
		}
		st.refs--
		if st.refs > 0 {
			continue
		}
		delete(b.eps, ip)
		if !st.owned {
			continue
		}
		r.wrote = true
		if err := b.hcn.DeleteEndpoint(st.id); err != nil && !hcnapi.IsNotFound(err) {
			b.logger.Error(err, "Deleting unreferenced remote endpoint failed", "hnsID", st.id, "ip", ip)
		} else {
			b.logger.V(3).Info("Deleted unreferenced remote endpoint", "hnsID", st.id, "ip", ip)
		}
	}
	if r.full {
		for _, id := range slices.Sorted(maps.Keys(r.lbs)) {
			if _, owned := b.owners[id]; !r.claimed[id] && !owned {
				b.logger.V(3).Info("Deleting HNS load balancer no service port uses", "hnsID", id)
				b.deleteLB(r, id, lbTypeOf(r.lbs[id]))
			}
		}
	}
	b.cleanupStale(r)
}

// lbTypeOf guesses a leftover load balancer's type for the metric label.
func lbTypeOf(lb *hcnapi.LoadBalancer) loadBalancerType {
	switch {
	case lb.VIP() == "":
		return lbTypeNodePort
	case len(lb.PortMappings) > 0 && lb.PortMappings[0].Flags&hcnapi.PortMappingFlagsVipExternalIP != 0:
		return lbTypeExternalIP
	}
	return lbTypeClusterIP
}

// cleanupStale retries at most MAX_COUNT_STALE_LOADBALANCERS queued
// deletions, so that a backlog cannot make one sync slow.
func (b *hnsBackend) cleanupStale(r *syncRun) {
	if len(b.stale) == 0 {
		return
	}
	b.logger.V(3).Info("Cleanup of stale load balancers", "count", len(b.stale))
	for i, id := range slices.Sorted(maps.Keys(b.stale)) {
		if i == MAX_COUNT_STALE_LOADBALANCERS {
			break
		}
		r.wrote = true
		if err := b.deleteLoadBalancer(id); err != nil {
			metrics.WinKernelLBDeleteFailure.WithLabelValues(string(b.family), string(b.stale[id]), classifyLBError(err)).Inc()
			continue
		}
		delete(b.stale, id)
	}
	if len(b.stale) > 0 {
		b.logger.V(3).Info("Stale load balancers still remaining", "count", len(b.stale))
	}
}

// classifyLBError is the error label of the winkernel failure metrics.
func classifyLBError(err error) string {
	switch {
	case err == nil:
		return "none"
	case hcnapi.IsPortAlreadyExists(err) || isPortAlreadyExistsPlatform(err):
		return "port_already_exists"
	case hcnapi.IsNetworkNotFound(err):
		return "network_not_found"
	case hcnapi.IsNotImplemented(err):
		return "not_implemented"
	case hcnapi.IsInvalidIP(err):
		return "invalid_ip"
	}
	return "other"
}
