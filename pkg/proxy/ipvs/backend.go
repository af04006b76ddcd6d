//go:build linux

package ipvs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	"k8s.io/kube-proxy/pkg/proxy/util/jumprules"
	utilipset "k8s.io/net-utils/ipset"
	utiliptables "k8s.io/net-utils/iptables"
	utilipvs "k8s.io/net-utils/ipvs"
)

// rulesBackend is the Proxier seen as the Shell's backend; a separate type
// so that its Sync does not clash with Provider's Sync.
type rulesBackend Proxier

// The Shell leaves out what no backend can program and any service port
// newServiceInfo did not make, which is all ipvs would refuse: it needs no
// syncshell.Validator.
var _ syncshell.Backend = &rulesBackend{}

// Sync implements syncshell.Backend.
func (b *rulesBackend) Sync(ctx context.Context, u *syncshell.Update) (syncshell.Outcome, error) {
	p := (*Proxier)(b)
	out, err := p.syncProxyRules(ctx, u)
	if p.dryRun != nil && err == nil && (out.Programmed || u.Full) {
		if werr := p.writePlannedState(p.dryRun); werr != nil {
			return out, fmt.Errorf("writing the planned state: %w", werr)
		}
	}
	return out, err
}

// syncProxyRules renders the changed service ports (all of them on a full
// sync) into the view and reconciles the kernel with what changed.
func (p *Proxier) syncProxyRules(ctx context.Context, u *syncshell.Update) (out syncshell.Outcome, retErr error) {
	st := p.st
	full := u.Full || !st.synced
	defer func() {
		if retErr != nil {
			// Some of what changed may not have been applied; the next (full)
			// sync re-reads the kernel.
			st.synced = false
		}
	}()

	if _, err := p.netlink.EnsureDummyDevice(defaultDummyDevice); err != nil {
		return out, fmt.Errorf("creating dummy interface %s: %w", defaultDummyDevice, err)
	}
	nodeAddrs, err := p.netlink.GetAllLocalAddressesExcept(defaultDummyDevice)
	if err != nil {
		p.logger.Error(err, "Error listing node addresses")
		nodeAddrs = sets.New[string]()
	}
	nodeIPs := p.nodePortIPs(nodeAddrs)
	if !nodeAddrs.Equal(st.nodeAddrs) || !slices.EqualFunc(nodeIPs, st.nodeIPs, net.IP.Equal) {
		// Bindings and node port virtual servers of every port depend on
		// them: nothing rendered before may be reused.
		p.logger.V(2).Info("Node addresses changed, syncing everything")
		full = true
		st.nodeGen++
	}
	st.nodeAddrs, st.nodeIPs = nodeAddrs, nodeIPs
	out.Full = full && !u.Full

	t := newTouched()
	var errs []error
	if full {
		// Everything is compared with the kernel just read; what the ports
		// want is kept, and below only re-rendered where its inputs changed.
		t.all = true
		if err := p.readKernel(t, st.synced); err != nil {
			return out, err
		}
		for name := range st.ports {
			if _, ok := u.Services[name]; !ok || u.Policy(name) == nil {
				st.setPort(name, nil, t)
				st.unindexPort(name)
			}
		}
	} else {
		for _, name := range u.RemovedPorts {
			st.setPort(name, nil, t)
			st.unindexPort(name)
		}
	}
	render := func(name proxy.ServicePortName, svc proxy.ServicePort) {
		info, _ := svc.(*servicePortInfo)
		tp := u.Policy(name)
		eps := u.Endpoints[name]
		if full && info != nil && tp != nil {
			// A port in st.ports is indexed already.
			if r := st.ports[name]; r != nil && r.sameInputs(svc, eps, tp, st.nodeGen) {
				return
			}
		}
		st.indexPort(name)
		if info == nil || tp == nil {
			st.setPort(name, nil, t)
			return
		}
		r := p.renderPort(ctx, name, info, tp, eps, nodeAddrs, nodeIPs)
		r.setInputs(svc, eps, tp, st.nodeGen)
		st.setPort(name, r, t)
	}
	if full || u.ServicesChanged {
		for name, svc := range u.Services {
			if full || u.Changed(name.NamespacedName) {
				render(name, svc)
			}
		}
	} else {
		// Only endpoints changed, so the changed Services have the ports
		// they had: no need to walk every service port.
		for nn := range u.ChangedServices() {
			for name := range st.bySvc[nn] {
				if svc, ok := u.Services[name]; ok {
					render(name, svc)
				}
			}
		}
	}

	// Upstream's order: virtual servers and addresses first, then the sets
	// and iptables rules that let traffic reach them, then removals.
	errs = append(errs, p.syncVirtualServers(t, false)...)
	errs = append(errs, p.bindAddresses(t)...)
	if err := p.syncIPSets(t); err != nil {
		return out, err
	}
	wrote, err := p.syncIPTables(full)
	if err != nil {
		return out, err
	}
	out.Programmed = wrote || t.all || t.vss.Len() > 0
	errs = append(errs, p.unbindAddresses(t)...)
	errs = append(errs, p.syncVirtualServers(t, true)...)
	if len(errs) > 0 {
		// As upstream, a virtual server, real server or address the kernel
		// refused does not fail the sync (the rest is in place and healthz
		// stays green); it is retried with a full sync, which re-reads the
		// kernel, after the retry interval.
		for _, err := range errs {
			p.logger.Error(err, "Failed to program IPVS")
		}
		out.SyncAgainAfter = p.retryInterval
		st.synced = false
		return out, nil
	}
	st.synced = true
	return out, nil
}

// nodePortIPs returns the addresses node ports are served on, sorted.
func (p *Proxier) nodePortIPs(nodeAddrs sets.Set[string]) []net.IP {
	var ips []net.IP
	if p.nodePortAddresses.MatchAll() {
		for _, s := range sets.List(nodeAddrs) {
			if ip := net.ParseIP(s); ip != nil {
				ips = append(ips, ip)
			}
		}
	} else {
		all, err := p.nodePortAddresses.GetNodeIPs(p.networkInterfacer)
		if err != nil {
			p.logger.Error(err, "Failed to get node IP address matching nodeport cidr")
			return nil
		}
		for _, ip := range all {
			if !ip.IsLoopback() {
				ips = append(ips, ip)
			}
		}
	}
	slices.SortFunc(ips, func(a, b net.IP) int { return bytes.Compare(a.To16(), b.To16()) })
	return ips
}

// readKernel replaces the view's kernel half with what the kernel holds:
// this family's virtual servers, the sets' entries and
// kube-ipvs0's addresses. It also creates missing sets. With consistent (the
// previous sync succeeded, so the view agreed with every port's wish), it
// leaves t.allVSs and t.allEntries false where the kernel holds exactly the
// view.
func (p *Proxier) readKernel(t *touched, consistent bool) error {
	st := p.st
	vss, err := p.ipvs.GetVirtualServers()
	if err != nil {
		return fmt.Errorf("listing IPVS virtual servers: %w", err)
	}
	// The view is updated in place, and what the kernel no longer lists
	// swept below: on a large table, building a new map on every full sync
	// costs more than comparing with the kernel.
	st.reads++
	kept, fresh := 0, 0
	// Naming every real server costs more than the rest of this loop, and
	// the list is almost always empty.
	draining := p.gtm.len() > 0
	for _, vs := range vss {
		// Virtual servers inside excludeCIDRs are kept in the view, so a
		// Service may still program one, but never deleted.
		if (vs.Address.To4() != nil) != (p.ipFamily == v1.IPv4Protocol) {
			continue
		}
		rss, err := p.ipvs.GetRealServers(vs)
		if err != nil {
			return fmt.Errorf("listing real servers of %s: %w", vs, err)
		}
		k := keyOf(vs)
		if a := st.applied[k]; a != nil && a.seen != st.reads && a.vs.Equal(vs) && a.matches(rss) {
			// As last programmed: keep it, and its draining marks.
			a.seen = st.reads
			kept++
			continue
		}
		a := &appliedVS{vs: vs, rss: make(map[rsKey]*appliedRS, len(rss)), seen: st.reads}
		for _, rs := range rss {
			a.rss[rsKeyOf(rs)] = &appliedRS{weight: rs.Weight,
				terminating: draining && p.gtm.InTerminationList(GetUniqueRSName(vs, rs))}
		}
		a.setListed(rss)
		st.applied[k] = a
		fresh++
	}
	same := fresh == 0 && kept == len(st.applied)
	if !same {
		for k, a := range st.applied {
			if a.seen != st.reads {
				delete(st.applied, k)
			}
		}
	}
	t.allVSs = !consistent || !same

	var b utilipset.Batch
	// One "ipset list" for all sets, not one per set: in a TCG guest under
	// load each exec took 1-3 s, and the per-set reads of about 20 sets
	// held a restarted kube-proxy's first sync for over a minute.
	existing, err := p.listAllSets()
	if err != nil {
		return err
	}
	prev := st.setApplied
	for id, set := range p.sets {
		if _, ok := existing[set.Name]; !ok {
			b.Create(&set.IPSet)
		}
		st.setApplied[id] = nil
	}
	if err := p.applyBatch(&b); err != nil {
		return fmt.Errorf("creating ip sets: %w", err)
	}
	for id, set := range p.sets {
		t.allEntries[id] = true
		entries, ok := existing[set.Name]
		if !ok {
			continue
		}
		if old := prev[id]; old != nil && old.Len() == len(entries) && old.HasAll(entries...) {
			// As last written: keep the set rather than build it again.
			st.setApplied[id] = old
			t.allEntries[id] = !consistent
			continue
		}
		st.setApplied[id] = sets.New(entries...)
	}
	for id := range st.setApplied {
		if st.setApplied[id] == nil {
			st.setApplied[id] = sets.New[string]()
		}
	}

	bound, err := p.netlink.GetLocalAddresses(defaultDummyDevice)
	if err != nil {
		p.logger.Error(err, "Error listing addresses bound to dummy interface", "interface", defaultDummyDevice)
		bound = sets.New[string]()
	}
	st.bound = bound
	st.rules = nil
	return nil
}

// renderPort computes what one service port needs, as upstream's sync loop
// body does. Its real servers come from the port's node-local model, the
// conversion every proxier and third-party backends get, so ipvs balances
// over exactly the endpoints they are handed.
func (p *Proxier) renderPort(ctx context.Context, name proxy.ServicePortName, info *servicePortInfo, tp *proxy.TrafficPolicy,
	eps []proxy.Endpoint, nodeAddrs sets.Set[string], nodeIPs []net.IP) *portRender {
	r := &portRender{}
	ln, ok := p.local.ComputeServicePort(ctx, name, info, tp)
	if !ok {
		// Logged by the model: a cluster IP of the other family or a port out
		// of range, which the shell's validation has already left out.
		return r
	}
	proto := info.protocol
	port := info.Port()
	add := func(id setID, e *utilipset.Entry) bool {
		if err := e.Check(&p.sets[id].IPSet); err != nil {
			p.logger.Error(err, "Error adding entry to ipset", "entry", e.String(), "ipset", p.sets[id].Name, "servicePortName", info.nameString)
			return false
		}
		r.entries = append(r.entries, setEntry{id, e.String()})
		return true
	}

	// Hairpin: a local endpoint reaching itself through the service is
	// masqueraded (KUBE-LOOP-BACK). Every local endpoint counts, ready or not,
	// as upstream lists them; the model holds only the endpoints traffic may
	// use, so this reads the brain's list.
	for _, ep := range eps {
		if !ep.IsLocal() || ep.IP() == "" || ep.Port() == 0 {
			continue
		}
		add(setLoopBack, &utilipset.Entry{IP: ep.IP(), Port: ep.Port(), Protocol: proto, IP2: ep.IP(), SetType: utilipset.HashIPPortIP})
	}

	internal := realServers(&ln, ln.InternalPolicy == localnode.PolicyLocal)
	external := realServers(&ln, ln.ExternalPolicy == localnode.PolicyLocal)
	newVS := func(ip net.IP, port int, rss []rsKey) {
		vs := utilipvs.VirtualServer{Address: ip, Port: uint16(port), Protocol: string(info.Protocol()), Scheduler: p.scheduler}
		if info.SessionAffinityType() == v1.ServiceAffinityClientIP {
			vs.Flags |= utilipvs.FlagPersistent
			vs.Timeout = uint32(info.StickyMaxAgeSeconds())
		}
		if p.scheduler == "mh" {
			// mh hashes the source port as well only with this flag.
			vs.Flags |= utilipvs.FlagSourceHash
		}
		r.vss = append(r.vss, &desiredVS{vs: vs, rss: rss})
	}
	bind := func(ip net.IP) {
		r.binds = append(r.binds, ip.String())
		r.entries = append(r.entries, setEntry{setIPVS, ip.String()})
	}

	clusterIP := info.ClusterIP()
	if !add(setClusterIP, &utilipset.Entry{IP: clusterIP.String(), Port: port, Protocol: proto, SetType: utilipset.HashIPPort}) {
		return r
	}
	newVS(clusterIP, port, internal)
	bind(clusterIP)

	for _, ip := range info.ExternalIPs() {
		e := &utilipset.Entry{IP: ip.String(), Port: port, Protocol: proto, SetType: utilipset.HashIPPort}
		set := setExternalIP
		if info.ExternalPolicyLocal() {
			set = setExternalIPLocal
		}
		if !add(set, e) {
			continue
		}
		newVS(ip, port, external)
		// An address already on another interface must not also be put
		// on kube-ipvs0.
		if !nodeAddrs.Has(ip.String()) {
			bind(ip)
		}
	}

	for _, ip := range info.LoadBalancerVIPs() {
		if !p.renderLoadBalancer(r, info, ip, add) {
			continue
		}
		newVS(ip, port, external)
		if !nodeAddrs.Has(ip.String()) {
			bind(ip)
		}
	}

	if info.NodePort() != 0 {
		if len(nodeIPs) == 0 {
			// Nothing to serve node ports on (and, as upstream, no health
			// check node port entry either).
			return r
		}
		if !p.renderNodePort(r, info, nodeIPs, add) {
			return r
		}
		for _, ip := range nodeIPs {
			newVS(ip, info.NodePort(), external)
		}
	}

	if hc := info.HealthCheckNodePort(); hc != 0 {
		add(setHealthCheckNodePort, &utilipset.Entry{Port: hc, Protocol: utilipset.ProtocolTCP, SetType: utilipset.BitmapPort})
	}
	return r
}

// realServers returns the real servers of a virtual server whose traffic
// has policy Local (local) or Cluster. As upstream's IPVS mode, a Local
// virtual server without local endpoints gets the Cluster endpoints if the
// port has any (https://pr.k8s.io/97081), so that local pods can still
// reach it. The model's endpoints are sorted by address and port and hold no
// duplicates, which is the order rsKey.compare gives.
func realServers(s *localnode.Service, local bool) []rsKey {
	eps := s.ClusterEndpoints()
	if local {
		if l := s.LocalEndpoints(); len(l) > 0 {
			eps = l
		}
	}
	out := make([]rsKey, len(eps))
	for i, ep := range eps {
		out[i] = rsKey{addr: ep.IP, port: ep.Port}
	}
	return out
}

func (p *Proxier) renderLoadBalancer(r *portRender, info *servicePortInfo, ip net.IP, add func(setID, *utilipset.Entry) bool) bool {
	proto, port := info.protocol, info.Port()
	e := &utilipset.Entry{IP: ip.String(), Port: port, Protocol: proto, SetType: utilipset.HashIPPort}
	if !add(setLoadBalancer, e) {
		return false
	}
	if info.ExternalPolicyLocal() && !add(setLoadBalancerLocal, e) {
		return false
	}
	ranges := info.LoadBalancerSourceRanges()
	if len(ranges) == 0 {
		return true
	}
	if !add(setLoadBalancerFW, e) {
		return false
	}
	allowFromNode := false
	for _, cidr := range ranges {
		add(setLoadBalancerSourceCIDR, &utilipset.Entry{IP: ip.String(), Port: port, Protocol: proto, Net: cidr.String(), SetType: utilipset.HashIPPortNet})
		if cidr.Contains(p.nodeIP) {
			allowFromNode = true
		}
	}
	if allowFromNode {
		// Traffic from the node to its own VIP has the VIP as source
		// (routes intercept it before it reaches the load balancer).
		return add(setLoadBalancerSourceIP, &utilipset.Entry{IP: ip.String(), Port: port, Protocol: proto, IP2: ip.String(), SetType: utilipset.HashIPPortIP})
	}
	// The node is outside the ranges, so its own connections to the VIP
	// (whose source is the VIP) are dropped before IPVS takes them.
	r.outFilter = append(r.outFilter, strings.Join([]string{
		"-A", string(kubeIPVSOutFilterChain), "-s", ip.String(),
		"-m", "ipvs", "--vaddr", ip.String(), "--vproto", proto, "--vport", strconv.Itoa(port),
		"-j", "DROP"}, " "))
	return true
}

func (p *Proxier) renderNodePort(r *portRender, info *servicePortInfo, nodeIPs []net.IP, add func(setID, *utilipset.Entry) bool) bool {
	proto, np := info.protocol, info.NodePort()
	var set, local setID
	var entries []*utilipset.Entry
	switch proto {
	case utilipset.ProtocolTCP, utilipset.ProtocolUDP:
		set, local = setNodePortTCP, setNodePortLocalTCP
		if proto == utilipset.ProtocolUDP {
			set, local = setNodePortUDP, setNodePortLocalUDP
		}
		entries = []*utilipset.Entry{{Port: np, Protocol: proto, SetType: utilipset.BitmapPort}}
	case utilipset.ProtocolSCTP:
		// SCTP has no bitmap:port set, so each node address is listed.
		set, local = setNodePortSCTP, setNodePortLocalSCTP
		for _, ip := range nodeIPs {
			entries = append(entries, &utilipset.Entry{IP: ip.String(), Port: np, Protocol: proto, SetType: utilipset.HashIPPort})
		}
	default:
		return false
	}
	for _, e := range entries {
		if !add(set, e) {
			return false
		}
	}
	if info.ExternalPolicyLocal() {
		for _, e := range entries {
			if !add(local, e) {
				return false
			}
		}
	}
	return true
}

// syncVirtualServers reconciles the touched virtual servers: with removals
// false it adds and updates the wanted ones and their real servers, with
// removals true it deletes those no port wants any more.
func (p *Proxier) syncVirtualServers(t *touched, removals bool) []error {
	st := p.st
	var errs []error
	for k := range t.vsKeys(st) {
		d := st.wanted(k)
		a := st.applied[k]
		if removals {
			if d == nil && a != nil {
				if p.excluded(a.vs.Address) {
					continue
				}
				p.logger.V(4).Info("Delete service", "virtualServer", a.vs)
				if err := p.ipvs.DeleteVirtualServer(a.vs); err != nil {
					errs = append(errs, fmt.Errorf("deleting virtual server %s: %w", a.vs, err))
					continue
				}
				delete(st.applied, k)
			}
			continue
		}
		if d == nil {
			continue
		}
		vs := d.vs
		switch {
		case a == nil:
			p.logger.V(3).Info("Adding new service", "virtualServer", vs.String())
			if err := p.ipvs.AddVirtualServer(&vs); err != nil {
				errs = append(errs, fmt.Errorf("adding virtual server %s: %w", vs.String(), err))
				continue
			}
			a = &appliedVS{vs: &vs, rss: map[rsKey]*appliedRS{}}
			st.applied[k] = a
		case !a.vs.Equal(&vs):
			p.logger.V(3).Info("IPVS service was changed", "virtualServer", vs.String())
			if err := p.ipvs.UpdateVirtualServer(&vs); err != nil {
				errs = append(errs, fmt.Errorf("updating virtual server %s: %w", vs.String(), err))
				continue
			}
			a.vs = &vs
		}
		errs = append(errs, p.syncRealServers(a, d)...)
	}
	return errs
}

// syncRealServers makes a's real servers d's: new ones are added with
// weight 1, gone ones drained by the graceful termination manager, and a
// draining one that is wanted again is replaced at once.
func (p *Proxier) syncRealServers(a *appliedVS, d *desiredVS) (errs []error) {
	if a.reconciled == d {
		return nil
	}
	a.reconciled = nil
	// What follows may change a.rss.
	a.changing()
	defer func() {
		if len(errs) == 0 && len(a.rss) == len(d.rss) {
			for _, cur := range a.rss {
				if cur.terminating {
					return
				}
			}
			a.reconciled = d
		}
	}()
	for _, k := range d.rss {
		cur := a.rss[k]
		if cur != nil && !cur.terminating && cur.weight == 1 {
			continue
		}
		rs := k.realServer(1)
		if cur != nil {
			var unique string
			if cur.terminating || cur.weight != 1 {
				unique = GetUniqueRSName(a.vs, rs)
			}
			switch {
			case unique != "" && p.gtm.InTerminationList(unique):
				p.logger.V(5).Info("new ep is in graceful delete list", "uniqueRealServer", unique)
				if err := p.gtm.MoveRSOutofGracefulDeleteList(unique); err != nil {
					errs = append(errs, err)
					continue
				}
				delete(a.rss, k)
			case cur.terminating:
				// The manager deleted it since the last sync.
				delete(a.rss, k)
			case cur.weight != 1:
				if err := p.ipvs.UpdateRealServer(a.vs, rs); err != nil {
					errs = append(errs, fmt.Errorf("updating real server %s: %w", GetUniqueRSName(a.vs, rs), err))
					continue
				}
				cur.weight = 1
				continue
			default:
				continue
			}
		}
		if err := p.ipvs.AddRealServer(a.vs, rs); err != nil {
			errs = append(errs, fmt.Errorf("adding real server %s: %w", GetUniqueRSName(a.vs, rs), err))
			continue
		}
		a.rss[k] = &appliedRS{weight: 1}
	}
	for k, cur := range a.rss {
		if _, ok := slices.BinarySearchFunc(d.rss, k, rsKey.compare); ok {
			continue
		}
		rs := k.realServer(cur.weight)
		unique := GetUniqueRSName(a.vs, rs)
		if p.gtm.InTerminationList(unique) {
			cur.terminating = true
			continue
		}
		if cur.terminating {
			delete(a.rss, k)
			continue
		}
		p.logger.V(5).Info("Using graceful delete", "uniqueRealServer", unique)
		vs := *a.vs
		if err := p.gtm.GracefulDeleteRS(&vs, rs); err != nil {
			errs = append(errs, fmt.Errorf("deleting real server %s: %w", unique, err))
			continue
		}
		if p.gtm.InTerminationList(unique) {
			cur.weight, cur.terminating = 0, true
		} else {
			delete(a.rss, k)
		}
	}
	return errs
}

func (p *Proxier) bindAddresses(t *touched) []error {
	st := p.st
	var errs []error
	for a := range t.bindKeys(st.bindRefs) {
		if st.bindRefs[a] == 0 || st.bound.Has(a) {
			continue
		}
		p.logger.V(4).Info("Bind address", "address", a)
		if _, err := p.netlink.EnsureAddressBind(a, defaultDummyDevice); err != nil {
			errs = append(errs, fmt.Errorf("binding %s to %s: %w", a, defaultDummyDevice, err))
			continue
		}
		st.bound.Insert(a)
	}
	return errs
}

func (p *Proxier) unbindAddresses(t *touched) []error {
	st := p.st
	var errs []error
	for a := range t.unbindKeys(st.bound) {
		if st.bindRefs[a] > 0 || !st.bound.Has(a) {
			continue
		}
		p.logger.V(2).Info("Removing address", "interface", defaultDummyDevice, "address", a)
		if err := p.netlink.UnbindAddress(a, defaultDummyDevice); err != nil {
			errs = append(errs, fmt.Errorf("unbinding %s from %s: %w", a, defaultDummyDevice, err))
			continue
		}
		st.bound.Delete(a)
	}
	return errs
}

// syncIPSets writes the touched entries' changes with one ipset restore.
func (p *Proxier) syncIPSets(t *touched) error {
	st := p.st
	var b utilipset.Batch
	for id := range p.sets {
		name := p.sets[id].Name
		for e := range t.delKeys(setID(id), st.setApplied[id]) {
			if st.setRefs[id][e] == 0 && st.setApplied[id].Has(e) {
				b.Del(name, e)
			}
		}
	}
	for id := range p.sets {
		name := p.sets[id].Name
		for e := range t.addKeys(setID(id), st.setRefs[id]) {
			if st.setRefs[id][e] > 0 && !st.setApplied[id].Has(e) {
				b.Add(name, e)
			}
		}
	}
	if b.Len() == 0 {
		return nil
	}
	if err := p.applyBatch(&b); err != nil {
		return fmt.Errorf("updating ip sets: %w", err)
	}
	for _, op := range b.Ops() {
		id := p.setID(op.Set)
		switch op.Kind {
		case utilipset.OpAdd:
			st.setApplied[id].Insert(op.Entry)
		case utilipset.OpDel:
			st.setApplied[id].Delete(op.Entry)
		}
	}
	return nil
}

func (p *Proxier) setID(name string) setID {
	for id, s := range p.sets {
		if s.Name == name {
			return setID(id)
		}
	}
	return -1
}

// applyBatch runs b with one ipset restore, or op by op when the handle
// cannot restore.
func (p *Proxier) applyBatch(b *utilipset.Batch) error {
	if err := b.Err(); err != nil {
		return err
	}
	if b.Len() == 0 {
		return nil
	}
	if p.restorer != nil {
		return p.restorer.Restore(b, true)
	}
	for _, op := range b.Ops() {
		var err error
		switch op.Kind {
		case utilipset.OpCreate:
			err = p.ipset.CreateSet(op.Spec, true)
		case utilipset.OpAdd:
			err = p.ipset.AddEntry(op.Entry, &p.sets[p.setID(op.Set)].IPSet, true)
		case utilipset.OpDel:
			if err = p.ipset.DelEntry(op.Entry, op.Set); utilipset.IsNotFoundError(err) {
				err = nil
			}
		default:
			err = fmt.Errorf("unexpected ipset operation %q", op.String())
		}
		if err != nil {
			return fmt.Errorf("%s: %w", op.String(), err)
		}
	}
	return nil
}

// syncIPTables writes the rules when they changed (always on a full sync)
// and reports whether it wrote.
func (p *Proxier) syncIPTables(full bool) (bool, error) {
	st := p.st
	data := p.iptablesRules()
	if !full && bytes.Equal(data, st.rules) {
		return false, nil
	}
	if full || st.rules == nil {
		p.linkChains()
	}
	st.rules = nil
	// Every chain is rewritten: the kernel's spelling of its rules is
	// taken again by the next drift check.
	clear(st.fingerprints)
	if err := p.ipt.RestoreAll(data, utiliptables.NoFlushTables, utiliptables.RestoreCounters); err != nil {
		var pErr utiliptables.ParseError
		if errors.As(err, &pErr) {
			p.logger.Error(pErr, "Failed to execute iptables-restore", "rules", utiliptables.ExtractLines(data, pErr.Line(), 3))
		} else {
			p.logger.Error(err, "Failed to execute iptables-restore", "rules", string(data))
		}
		metrics.IPTablesRestoreFailuresTotal.WithLabelValues(string(p.ipFamily)).Inc()
		return false, fmt.Errorf("iptables-restore: %w", err)
	}
	st.rules = data
	return true, nil
}

// linkChains creates the chains and the jumps to them from the built-in
// chains, which a restore with NoFlushTables does not write. jumprules
// reads the filter and nat tables (two iptables-save runs) and adds only
// what is missing, in one iptables-restore: a full sync of a node that has
// everything makes no other call, where one EnsureChain per chain and one
// EnsureRule per jump (each an "iptables -C" and maybe "-I") were 20-30
// executions, over a minute of a restarted kube-proxy's first sync on a
// slow, loaded node. A failure is logged, as each Ensure call's was: the
// restore that follows still writes our chains.
func (p *Proxier) linkChains() {
	if err := jumprules.Ensure(p.logger, p.ipt, iptablesJumpChains, iptablesChains, nil); err != nil {
		p.logger.Error(err, "Failed to ensure the chains and the jumps to them from built-in chains")
	}
}
