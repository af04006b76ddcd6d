//go:build linux

package ipvs

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	utiliptables "k8s.io/net-utils/iptables"
)

var _ syncshell.RulesChecker = &rulesBackend{}

// RulesMissing reports whether something this proxier programmed was
// removed from outside: a jump from a built-in chain (re-added here, as
// upstream re-ensured them on every sync), kube-ipvs0, one of the sets, one
// of its virtual servers, or one of their real servers (or its weight). The
// Shell then makes the next sync full.
func (b *rulesBackend) RulesMissing(ctx context.Context) bool {
	p := (*Proxier)(b)
	st := p.st
	if !st.synced {
		return false
	}
	missing := false
	for _, jc := range iptablesJumpChains {
		args := []string{"-m", "comment", "--comment", jc.comment, "-j", string(jc.to)}
		exists, err := p.ipt.EnsureRule(utiliptables.Prepend, jc.table, jc.from, args...)
		if err != nil || !exists {
			p.logger.Info("iptables jump missing", "table", jc.table, "chain", jc.from, "target", jc.to, "err", err)
			missing = true
		}
	}
	if exists, err := p.ipt.ChainExists(utiliptables.TableNAT, kubeServicesChain); err != nil || !exists {
		missing = true
	}
	if exists, err := p.netlink.EnsureDummyDevice(defaultDummyDevice); err != nil || !exists {
		p.logger.Info("Dummy interface was missing", "interface", defaultDummyDevice, "err", err)
		missing = true
	}
	if names, err := p.ipset.ListSets(); err == nil {
		have := sets.New(names...)
		for _, set := range p.sets {
			if !have.Has(set.Name) {
				p.logger.Info("IP set missing", "ipset", set.Name)
				missing = true
			}
		}
	}
	if vss, err := p.ipvs.GetVirtualServers(); err == nil {
		n := 0
		for _, vs := range vss {
			if (vs.Address.To4() != nil) != (p.ipFamily == v1.IPv4Protocol) {
				continue
			}
			n++
			a, ok := st.applied[keyOf(vs)]
			if !ok {
				missing = true
				continue
			}
			if missing {
				continue
			}
			// A real server deleted (or its weight changed) by hand leaves
			// the virtual server in place: only its listing shows it. As
			// upstream, which lists every virtual server's real servers on
			// every sync, it is put back within one sync period. A real
			// server the graceful termination manager has deleted since
			// the last sync shows here too, and costs one full sync.
			rss, err := p.ipvs.GetRealServers(vs)
			if err != nil || !a.matches(rss) {
				p.logger.Info("IPVS real servers changed behind kube-proxy's back", "virtualServer", vs, "err", err)
				missing = true
			}
		}
		if n != len(st.applied) {
			p.logger.Info("IPVS virtual servers changed behind kube-proxy's back", "have", n, "want", len(st.applied))
			missing = true
		}
	}
	return missing
}
