//go:build linux

package iptables

import (
	"bytes"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	"k8s.io/kube-proxy/pkg/proxy/util/chaincheck"
	utiliptables "k8s.io/net-utils/iptables"
)

// view is the proxier's picture of what its restores put in the kernel:
// each service port's rules and chains, the top-level chains' content, and
// the chains waiting to be deleted. Partial syncs are computed against it
// and never read the kernel. After a failed restore it is not trusted (valid
// is false) until a full sync, which re-renders every port and reads back
// the kernel's chains, has succeeded.
type view struct {
	// ports holds each service port's rules as last rendered; a partial sync
	// reuses those of unchanged ports verbatim. order is its keys sorted,
	// for deterministic output, rebuilt only when the set of ports changes.
	ports map[proxy.ServicePortName]*portRules
	order []proxy.ServicePortName
	// chains counts the ports' chains: the service chains the nat table
	// holds once this sync's restore is applied.
	chains int

	// stale holds chains to delete, with the service port that owned them
	// (chain names embed a hash of the port, so no two ports share one);
	// lastStaleCleanup is when they were last written out.
	stale            map[utiliptables.Chain]proxy.ServicePortName
	lastStaleCleanup time.Time
	// prevChains is scratch space for a port's chains before re-rendering.
	prevChains []utiliptables.Chain

	// The top-level chains' content as last restored, valid if valid, so
	// partial syncs can leave them out when unchanged.
	filterChains, filterRules ruleBuf
	dispatch                  ruleBuf
	valid                     bool
	lastTopLevelWrite         time.Time
	// natTop is the rules of KUBE-POSTROUTING and KUBE-MARK-MASQ as last
	// restored, for the drift check.
	natTop []byte

	// fingerprints holds, per chain, a hash of its rules as iptables-save
	// printed them at a drift check that found the chain as written (same
	// rule count). A chain written since has none: the kernel's spelling
	// of a rule differs from ours (added "-m tcp", "/32"...), so only its
	// rule count can be compared until the next check takes its
	// fingerprint. See drift.go.
	fingerprints map[chaincheck.Key]uint64
}

func newView() *view {
	return &view{
		ports:        make(map[proxy.ServicePortName]*portRules),
		stale:        make(map[utiliptables.Chain]proxy.ServicePortName),
		fingerprints: make(map[chaincheck.Key]uint64),
	}
}

// syncPorts brings the set of ports in line with u's: when it changed, the
// order is rebuilt and the chains of ports that are gone are queued for
// deletion.
func (v *view) syncPorts(u *syncshell.Update) {
	if !u.ServicesChanged && len(v.order) == len(u.Services) {
		return
	}
	v.order = v.order[:0]
	for name := range u.Services {
		v.order = append(v.order, name)
	}
	slices.SortFunc(v.order, proxy.CompareServicePortNames)
	for name, r := range v.ports {
		if _, ok := u.Services[name]; !ok {
			for _, c := range r.chains {
				v.stale[c] = name
				delete(v.fingerprints, chaincheck.Key{Table: utiliptables.TableNAT, Chain: c})
			}
			v.chains -= len(r.chains)
			delete(v.ports, name)
		}
	}
}

// beginRender returns name's rules for re-rendering; endRender, called
// after, queues the chains the new rendering no longer has.
func (v *view) beginRender(name proxy.ServicePortName) *portRules {
	r := v.ports[name]
	if r == nil {
		r = &portRules{}
		v.ports[name] = r
	}
	v.prevChains = append(v.prevChains[:0], r.chains...)
	return r
}

func (v *view) endRender(name proxy.ServicePortName, r *portRules) {
	v.chains += len(r.chains) - len(v.prevChains)
	for _, c := range v.prevChains {
		delete(v.fingerprints, chaincheck.Key{Table: utiliptables.TableNAT, Chain: c})
		if !slices.Contains(r.chains, c) {
			v.stale[c] = name
		}
	}
	for _, c := range r.chains {
		delete(v.fingerprints, chaincheck.Key{Table: utiliptables.TableNAT, Chain: c})
	}
}

// takeStale returns the queued chains no port uses (again), and forgets the
// queue. Unless now, it waits until period has passed since the last time:
// large clusters delete stale chains at most once per syncPeriod, as
// upstream does, since deletions are restore input too and an unreferenced
// chain is harmless meanwhile.
func (v *view) takeStale(now bool, at time.Time, period time.Duration) []utiliptables.Chain {
	if !now && at.Sub(v.lastStaleCleanup) < period {
		return nil
	}
	var stale []utiliptables.Chain
	for c, owner := range v.stale {
		if r := v.ports[owner]; r != nil && slices.Contains(r.chains, c) {
			continue
		}
		stale = append(stale, c)
	}
	clear(v.stale)
	v.lastStaleCleanup = at
	return stale
}

// leftovers returns the service chains of existing (the chains found in the
// kernel's nat table) that no port uses: chains of an earlier process or of a failed sync.
func (v *view) leftovers(existing sets.Set[utiliptables.Chain]) []utiliptables.Chain {
	for _, r := range v.ports {
		existing.Delete(r.chains...)
	}
	var out []utiliptables.Chain
	for c := range existing {
		if isServiceChainName(string(c)) {
			out = append(out, c)
		}
	}
	return out
}

// topLevelWrites decides which top-level chains t's restore writes. A
// partial sync leaves them out when the last successful restore put exactly
// this there: an endpoint change then costs iptables-restore the changed
// port's chains only, not every port's dispatch rules (--noflush restores
// leave undeclared chains alone). Upstream rewrites them on every sync,
// which also repairs them if someone flushed one but left the canary; to
// keep that repair within a syncPeriod of the next change, they are written
// at least once per period anyway, and on every full sync. Otherwise, when
// only dispatch rules changed, they are edited in place (t.edits, edits.go)
// and natTop is false.
func (v *view) topLevelWrites(t *tables, full bool, now time.Time, period time.Duration) (filter, natTop bool) {
	if full || !v.valid || now.Sub(v.lastTopLevelWrite) >= period {
		return true, true
	}
	filter = !bytes.Equal(t.filterChains.b, v.filterChains.b) || !bytes.Equal(t.filterRules.b, v.filterRules.b)
	natTop = !bytes.Equal(t.dispatch.b, v.dispatch.b) && !t.editDispatch(v.dispatch.b)
	return filter, natTop
}

// commit records a successful restore of t. The buffers are swapped rather
// than copied; the next sync resets the ones t gets back.
func (v *view) commit(t *tables, full, filter, natTop bool, now time.Time) {
	if full {
		// Every chain was written: none keeps its fingerprint.
		clear(v.fingerprints)
	}
	if filter {
		for _, c := range filterTopChains {
			delete(v.fingerprints, chaincheck.Key{Table: utiliptables.TableFilter, Chain: c})
		}
		t.filterChains, v.filterChains = v.filterChains, t.filterChains
		t.filterRules, v.filterRules = v.filterRules, t.filterRules
	}
	if natTop {
		v.natTop = append(v.natTop[:0], t.natRules.b[:t.natTopRules]...)
	}
	if natTop || len(t.edits.b) > 0 {
		t.dispatch, v.dispatch = v.dispatch, t.dispatch
		for _, c := range natTopChains {
			delete(v.fingerprints, chaincheck.Key{Table: utiliptables.TableNAT, Chain: c})
		}
	}
	v.valid = true
	if filter && natTop {
		v.lastTopLevelWrite = now
	}
}

// invalidate forgets what the kernel holds after a failed sync: the changes
// it was to apply are consumed, so only a full sync can restore it.
func (v *view) invalidate() { v.valid = false }
