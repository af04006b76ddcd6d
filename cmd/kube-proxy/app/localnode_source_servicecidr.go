package app

import (
	"slices"

	networkingv1 "k8s.io/api/networking/v1"

	"k8s.io/kube-proxy/pkg/features"
	"k8s.io/kube-proxy/pkg/proxy/config"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

var _ source.ServiceCIDRHandler = &localNodeFeed{}

// serviceCIDRUnion is what config.ServiceCIDRConfig does for an informer: the union of
// every ServiceCIDR object's CIDRs, a CIDR counted once per object naming it, so that
// deleting one of two objects with the same range keeps the range.
type serviceCIDRUnion struct {
	refs map[string]int
}

func (u *serviceCIDRUnion) apply(old, cur *networkingv1.ServiceCIDR) []string {
	if u.refs == nil {
		u.refs = map[string]int{}
	}
	if old != nil {
		for _, c := range old.Spec.CIDRs {
			if u.refs[c]--; u.refs[c] <= 0 {
				delete(u.refs, c)
			}
		}
	}
	if cur != nil {
		for _, c := range cur.Spec.CIDRs {
			u.refs[c]++
		}
	}
	cidrs := make([]string, 0, len(u.refs))
	for c := range u.refs {
		cidrs = append(cidrs, c)
	}
	// Sorted so that a dry run prints the same rules every time.
	slices.Sort(cidrs)
	return cidrs
}

// serviceCIDRsChanged updates the union and hands it to the targets that take it (the
// proxier), as startInformers' ServiceCIDRConfig does with a cluster. cidrMu is held
// through dispatch so that unions reach the targets in the order they were computed.
func (f *localNodeFeed) serviceCIDRsChanged(old, cur *networkingv1.ServiceCIDR) {
	if !features.DefaultFeatureGate.Enabled(features.MultiCIDRServiceAllocator) {
		return
	}
	f.cidrMu.Lock()
	cidrs := f.cidrs.apply(old, cur)
	f.deliver(func(p *pendingFeed) { p.cidrs, p.haveCIDRs = cidrs, true },
		func(h eventHandler) {
			if ch, ok := h.(config.ServiceCIDRHandler); ok {
				ch.OnServiceCIDRsChanged(cidrs)
			}
		})
	f.cidrMu.Unlock()
}

// OnServiceCIDRAdd, OnServiceCIDRUpdate and OnServiceCIDRDelete implement
// source.ServiceCIDRHandler: the server's ServiceCIDRs feed the proxier's guard against
// traffic to unallocated cluster IPs, as a cluster's would.
func (f *localNodeFeed) OnServiceCIDRAdd(c *networkingv1.ServiceCIDR) { f.serviceCIDRsChanged(nil, c) }
func (f *localNodeFeed) OnServiceCIDRUpdate(old, c *networkingv1.ServiceCIDR) {
	f.serviceCIDRsChanged(old, c)
}
func (f *localNodeFeed) OnServiceCIDRDelete(c *networkingv1.ServiceCIDR) {
	f.serviceCIDRsChanged(c, nil)
}

// OnServiceCIDRsSynced hands on the union even when the server has no ServiceCIDRs, as
// ServiceCIDRConfig.Run does once its informer has listed.
func (f *localNodeFeed) OnServiceCIDRsSynced() { f.serviceCIDRsChanged(nil, nil) }
