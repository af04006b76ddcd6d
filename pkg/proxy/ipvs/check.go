//go:build linux

package ipvs

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	"k8s.io/kube-proxy/pkg/proxy/util/chaincheck"
	"k8s.io/kube-proxy/pkg/proxy/util/jumprules"
	utilipset "k8s.io/net-utils/ipset"
	utiliptables "k8s.io/net-utils/iptables"
	utilipvs "k8s.io/net-utils/ipvs"
)

// Drift kinds: the repair metric's label values, a small fixed set.
const (
	driftInterface     = "interface"                  // kube-ipvs0 missing
	driftAddress       = "address"                    // an address bound to kube-ipvs0, or not
	driftSet           = "set"                        // one of our ip sets missing
	driftSetElement    = "set element"                // an entry of one of our ip sets
	driftVirtualServer = "virtual server"             // an IPVS virtual server or its settings
	driftRealServer    = "real server"                // a real server or its weight
	driftChain         = string(chaincheck.KindChain) // one of our iptables chains missing
	driftRule          = string(chaincheck.KindRule)  // a chain holding other rules than written
	driftJump          = "jump"                       // a jump from a built-in chain missing
)

var _ syncshell.DriftChecker = &rulesBackend{}

// Drift compares the state the proxier keeps of what it programmed with
// the kernel, with one read of each kind: kube-ipvs0's addresses (one
// netlink dump), every ip set's entries (one "ipset list"), the virtual
// servers (one dump) and each one's real servers with their weights (one
// dump per virtual server: IPVS has no call listing them all, and upstream
// listed them on every sync too), and one iptables-save of nat and filter
// compared with the last restore's input (see iptablesDrift). Any
// difference makes the Shell's next sync full, and a full sync re-reads and
// reconciles everything.
//
// Nothing is reported while the state is not trusted (before the first
// successful sync, after a failed one): the next sync is full anyway.
func (b *rulesBackend) Drift(ctx context.Context) ([]syncshell.Drift, error) {
	p := (*Proxier)(b)
	if !p.st.synced {
		return nil, nil
	}
	// Each read below is an exec or a netlink dump, slow on a loaded or
	// emulated host; between them a change that arrived since the check
	// started goes first (see syncshell's driftBeforeSync).
	drifts := p.addressDrift(nil)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	drifts, err := p.setDrift(drifts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if drifts, err = p.virtualServerDrift(ctx, drifts); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return p.iptablesDrift(drifts)
}

// addressDrift compares kube-ipvs0's addresses of this family with those
// the ports want bound: a Service address unbound stops local traffic to
// it; an address bound by someone else is removed, as upstream's sync did.
func (p *Proxier) addressDrift(drifts []syncshell.Drift) []syncshell.Drift {
	listed, err := p.netlink.ListBindAddress(defaultDummyDevice)
	if err != nil {
		return append(drifts, syncshell.Drift{Kind: driftInterface, Object: defaultDummyDevice, Expected: "present", Found: err.Error()})
	}
	bound := make(map[string]bool, len(listed))
	for _, s := range listed {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Is4() != (p.ipFamily == v1.IPv4Protocol) || a.IsLoopback() || a.IsLinkLocalUnicast() {
			continue
		}
		bound[a.String()] = true
	}
	for a := range p.st.bindRefs {
		if !bound[a] {
			drifts = append(drifts, syncshell.Drift{Kind: driftAddress, Object: defaultDummyDevice + " " + a, Expected: "bound", Found: ""})
		}
		delete(bound, a)
	}
	for a := range bound {
		drifts = append(drifts, syncshell.Drift{Kind: driftAddress, Object: defaultDummyDevice + " " + a, Expected: "", Found: "bound"})
	}
	return drifts
}

// setDrift compares every set's entries with those the ports want.
func (p *Proxier) setDrift(drifts []syncshell.Drift) ([]syncshell.Drift, error) {
	all, err := p.listAllSets()
	if err != nil {
		return nil, err
	}
	for id, set := range p.sets {
		entries, ok := all[set.Name]
		if !ok {
			drifts = append(drifts, syncshell.Drift{Kind: driftSet, Object: set.Name, Expected: "present", Found: ""})
			continue
		}
		want := p.st.setRefs[id]
		var extra []string
		for _, e := range entries {
			if want[e] == 0 {
				extra = append(extra, e)
			}
		}
		if len(extra) == 0 && len(entries) == len(want) {
			continue
		}
		drifts = entryDrift(set.Name, want, entries, extra, drifts)
	}
	return drifts, nil
}

// entryDrift appends the differences of one set, whose listing (entries)
// does not match what the ports want; extra are the entries listed but not
// wanted as spelled. ipset may spell an entry otherwise than we wrote it (a
// host network without its /32), so those are compared once more in a
// canonical spelling before being called drift.
func entryDrift(set string, want map[string]int, entries, extra []string, drifts []syncshell.Drift) []syncshell.Drift {
	canonical := make(map[string]string, len(want))
	for e := range want {
		canonical[canonicalEntry(e)] = e
	}
	matched := make(map[string]bool, len(entries))
	for _, e := range entries {
		if want[e] > 0 {
			matched[e] = true
		}
	}
	for _, e := range extra {
		if w, ok := canonical[canonicalEntry(e)]; ok {
			matched[w] = true
			continue
		}
		drifts = append(drifts, syncshell.Drift{Kind: driftSetElement, Object: set + " " + e, Expected: "", Found: "present"})
	}
	for e := range want {
		if !matched[e] {
			drifts = append(drifts, syncshell.Drift{Kind: driftSetElement, Object: set + " " + e, Expected: "present", Found: ""})
		}
	}
	return drifts
}

// canonicalEntry spells an ip set entry ("ip,proto:port,net"...) with
// addresses in netip's form and host networks (/32, /128) as addresses.
func canonicalEntry(e string) string {
	parts := strings.Split(strings.ToLower(e), ",")
	for i, part := range parts {
		if pfx, err := netip.ParsePrefix(part); err == nil {
			if pfx.IsSingleIP() {
				parts[i] = pfx.Addr().String()
			} else {
				parts[i] = pfx.Masked().String()
			}
		} else if a, err := netip.ParseAddr(part); err == nil {
			parts[i] = a.String()
		}
	}
	return strings.Join(parts, ",")
}

// listAllSets returns the entries of every set of ours that exists: with
// one "ipset list" where the handle can, else set by set.
func (p *Proxier) listAllSets() (map[string][]string, error) {
	if l, ok := p.ipset.(utilipset.AllLister); ok {
		all, err := l.ListAllEntries()
		if err != nil {
			return nil, fmt.Errorf("listing ip sets: %w", err)
		}
		return all, nil
	}
	names, err := p.ipset.ListSets()
	if err != nil {
		return nil, fmt.Errorf("listing ip sets: %w", err)
	}
	all := make(map[string][]string, len(names))
	for _, set := range p.sets {
		if !slices.Contains(names, set.Name) {
			continue
		}
		if all[set.Name], err = p.ipset.ListEntries(set.Name); err != nil {
			return nil, fmt.Errorf("listing ip set %s: %w", set.Name, err)
		}
	}
	return all, nil
}

// virtualServerDrift compares this family's virtual servers and their real
// servers, weights included, with what was programmed. A real server
// re-weighted by hand is repaired too, which upstream never did. A real
// server the graceful termination manager deleted since the last sync
// shows here as well, and costs one full sync.
func (p *Proxier) virtualServerDrift(ctx context.Context, drifts []syncshell.Drift) ([]syncshell.Drift, error) {
	st := p.st
	vss, err := p.ipvs.GetVirtualServers()
	if err != nil {
		return nil, fmt.Errorf("listing IPVS virtual servers to compare them with what was programmed: %w", err)
	}
	seen := 0
	for _, vs := range vss {
		if (vs.Address.To4() != nil) != (p.ipFamily == v1.IPv4Protocol) {
			continue
		}
		k := keyOf(vs)
		a := st.applied[k]
		if a == nil {
			// One inside excludeCIDRs belongs to someone else.
			if !p.excluded(vs.Address) {
				drifts = append(drifts, syncshell.Drift{Kind: driftVirtualServer, Object: vs.String(), Expected: "", Found: vsText(vs)})
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		seen++
		if !a.vs.Equal(vs) {
			drifts = append(drifts, syncshell.Drift{Kind: driftVirtualServer, Object: vs.String(), Expected: vsText(a.vs), Found: vsText(vs)})
		}
		rss, err := p.ipvs.GetRealServers(vs)
		if err != nil {
			return nil, fmt.Errorf("listing real servers of %s to compare them with what was programmed: %w", vs, err)
		}
		if !a.matches(rss) {
			drifts = realServerDrift(vs, a, rss, drifts)
		}
	}
	if seen != len(st.applied) {
		present := make(map[vsKey]bool, len(vss))
		for _, vs := range vss {
			present[keyOf(vs)] = true
		}
		for k, a := range st.applied {
			if present[k] {
				continue
			}
			// Someone else's, in excludeCIDRs, and gone: not ours to restore.
			if _, wanted := st.claims[k]; !wanted && p.excluded(a.vs.Address) {
				continue
			}
			drifts = append(drifts, syncshell.Drift{Kind: driftVirtualServer, Object: a.vs.String(), Expected: vsText(a.vs), Found: ""})
		}
	}
	return drifts, nil
}

func realServerDrift(vs *utilipvs.VirtualServer, a *appliedVS, rss []*utilipvs.RealServer, drifts []syncshell.Drift) []syncshell.Drift {
	listed := make(map[rsKey]bool, len(rss))
	for _, rs := range rss {
		k := rsKeyOf(rs)
		listed[k] = true
		object := vs.String() + " -> " + rs.String()
		switch cur := a.rss[k]; {
		case cur == nil:
			drifts = append(drifts, syncshell.Drift{Kind: driftRealServer, Object: object, Expected: "", Found: weightText(rs.Weight)})
		case cur.weight != rs.Weight:
			drifts = append(drifts, syncshell.Drift{Kind: driftRealServer, Object: object, Expected: weightText(cur.weight), Found: weightText(rs.Weight)})
		}
	}
	for k, cur := range a.rss {
		if !listed[k] && cur.terminating {
			// The graceful termination manager deleted it, as it was
			// asked to: the state catches up, nothing to repair.
			delete(a.rss, k)
			a.changing()
			continue
		}
		if !listed[k] {
			rs := k.realServer(cur.weight)
			drifts = append(drifts, syncshell.Drift{Kind: driftRealServer, Object: vs.String() + " -> " + rs.String(), Expected: weightText(cur.weight), Found: ""})
		}
	}
	return drifts
}

func vsText(vs *utilipvs.VirtualServer) string {
	return fmt.Sprintf("scheduler %s flags %#x timeout %d", vs.Scheduler, uint32(vs.Flags), vs.Timeout)
}

func weightText(w int) string { return "weight " + strconv.Itoa(w) }

// iptablesDrift compares one iptables-save of nat and of filter with the
// last restore's input (st.rules), which holds every one of our chains in
// full: each must exist with as many rules, and, once a check has seen it
// so, keep the same rules (a fingerprint of iptables-save's spelling, which
// differs from ours). The jumps from the built-in chains must be there.
// When st.rules is nil the next sync writes the rules anyway.
//
// On iptables-nft the kernel counts committed nf_tables transactions: when
// none was committed since a check found the rules as written, they are
// not read again.
func (p *Proxier) iptablesDrift(drifts []syncshell.Drift) ([]syncshell.Drift, error) {
	st := p.st
	if st.iptGen.Unchanged(p.ipt, p.logger) && st.rules != nil {
		return drifts, nil
	}
	before := len(drifts)
	var save bytes.Buffer
	var check chaincheck.Check
	var diffs []chaincheck.Difference
	for _, table := range [...]utiliptables.Table{utiliptables.TableNAT, utiliptables.TableFilter} {
		save.Reset()
		if err := p.ipt.SaveInto(table, &save); err != nil {
			st.iptGen.Done(false)
			return nil, fmt.Errorf("reading the %s table to compare it with the rules written: %w", table, err)
		}
		if st.rules != nil {
			check.Reset(table)
			check.WantTable(st.rules)
			check.Scan(save.Bytes(), nil)
			diffs = check.Compare(st.fingerprints, diffs[:0])
			for _, d := range diffs {
				drifts = append(drifts, syncshell.Drift{Kind: string(d.Kind), Object: d.Key.Object(), Expected: d.Expected, Found: d.Found})
			}
		}
		drifts = jumpDrifts(table, save.Bytes(), drifts)
	}
	st.iptGen.Done(len(drifts) == before && st.rules != nil)
	return drifts, nil
}

// jumpDrifts appends the jumps from table's built-in chains to ours that an
// iptables-save of it lacks, judged as linkChains judges them (jumprules).
func jumpDrifts(table utiliptables.Table, save []byte, drifts []syncshell.Drift) []syncshell.Drift {
	for _, j := range jumprules.ParseTableState(save).MissingJumps(table, iptablesJumpChains) {
		drifts = append(drifts, syncshell.Drift{Kind: driftJump, Object: j.Name(), Expected: j.Rule()})
	}
	return drifts
}
