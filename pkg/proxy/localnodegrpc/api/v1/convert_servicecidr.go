package localnodev1

import (
	"fmt"
	"net"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceCIDRFromAPI converts a ServiceCIDR of the cluster.
func ServiceCIDRFromAPI(c *networkingv1.ServiceCIDR) *ServiceCIDR {
	return &ServiceCIDR{Name: c.Name, Cidrs: slices.Clone(c.Spec.CIDRs), ResourceVersion: c.ResourceVersion}
}

// ServiceCIDRToAPI rebuilds a ServiceCIDR with the CIDRs a proxy reads. Unlike a
// Service's addresses, which the brain judges, a CIDR that does not parse is refused
// here: the proxier would otherwise drop it silently and stop guarding that range.
func ServiceCIDRToAPI(g *ServiceCIDR) (*networkingv1.ServiceCIDR, error) {
	if g == nil {
		return nil, fmt.Errorf("service cidr: missing")
	}
	if g.GetName() == "" {
		return nil, fmt.Errorf("service cidr: name: missing")
	}
	out := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: g.GetName(), ResourceVersion: g.GetResourceVersion()}}
	for i, c := range g.GetCidrs() {
		if _, _, err := net.ParseCIDR(c); err != nil {
			return nil, fmt.Errorf("service cidr %s: cidrs[%d]: %q is not a CIDR", g.GetName(), i, c)
		}
		out.Spec.CIDRs = append(out.Spec.CIDRs, c)
	}
	return out, nil
}
