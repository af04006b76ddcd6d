package localnode

import (
	"slices"
	"strings"
)

// RuleOrder is a service port's endpoints in the order kube-proxy's rule generators
// list them, split by the traffic they serve. Service.Endpoints is sorted by address;
// rules list endpoints by their "ip:port" text, which is the order of the brain's
// endpoint lists and so of upstream's rules (10.0.0.10:80 before 10.0.0.9:80). The
// order decides rule order and which probability each rule gets, so a generator that
// wants rules identical to upstream's walks endpoints in this order.
type RuleOrder struct {
	// Endpoints point into Service.Endpoints, sorted by their text; Text[k] is
	// Endpoints[k].String().
	Endpoints []*Endpoint
	Text      []string
	// Cluster and Local are the positions in Endpoints, ascending, of the endpoints
	// Cluster-policy and Local-policy traffic may use: nil when the port uses no
	// such policy.
	Cluster, Local []int
}

// RuleOrder returns s's endpoints in rule order. It allocates one string per
// endpoint; callers convert a port when it changed, not at every sync.
func (s *Service) RuleOrder() RuleOrder {
	n := len(s.Endpoints)
	o := RuleOrder{Endpoints: make([]*Endpoint, n), Text: make([]string, n)}
	idx := make([]int, n)
	text := make([]string, n)
	for i := range s.Endpoints {
		idx[i] = i
		text[i] = s.Endpoints[i].String()
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(text[a], text[b]) })
	useCluster, useLocal := s.UsesClusterEndpoints(), s.UsesLocalEndpoints()
	for k, i := range idx {
		ep := &s.Endpoints[i]
		o.Endpoints[k], o.Text[k] = ep, text[i]
		if useCluster && ep.ForCluster {
			o.Cluster = append(o.Cluster, k)
		}
		if useLocal && ep.ForLocal {
			o.Local = append(o.Local, k)
		}
	}
	return o
}
