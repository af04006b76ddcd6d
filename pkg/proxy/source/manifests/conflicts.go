package manifests

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// claim is a value that only one Service may hold, as an API server's allocators
// ensure: a cluster IP, or a node port (health-check node ports come from the same
// range).
type claim struct {
	what  string // "clusterIP" or "nodePort"
	value string
}

type holder struct {
	key   Key
	field string
	file  string
	line  int
}

type fieldClaim struct {
	claim
	field string
}

// serviceClaims lists what svc holds, in field order, with the field that holds each.
func serviceClaims(svc *v1.Service) []fieldClaim {
	var out []fieldClaim
	seen := map[claim]bool{}
	add := func(c claim, field string) {
		if !seen[c] {
			seen[c] = true
			out = append(out, fieldClaim{c, field})
		}
	}
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		return nil
	}
	for i, ip := range svc.Spec.ClusterIPs {
		if parsed := netutils.ParseIPSloppy(ip); parsed != nil {
			add(claim{"clusterIP", parsed.String()}, fmt.Sprintf("spec.clusterIPs[%d]", i))
		}
	}
	// One Service may use a node port for several protocols; only other Services
	// may not.
	for i, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			add(claim{"nodePort", strconv.Itoa(int(p.NodePort))}, fmt.Sprintf("spec.ports[%d].nodePort", i))
		}
	}
	return out
}

// rejectConflicts removes from desired every Service that claims a cluster IP or node
// port another Service already holds, and returns a Problem for each. Services that
// are applied unchanged claim first, so a new or edited Service can never take an
// address from one that is in service; the rest claim in file order.
//
// It also rejects a health-check node port that is one of the Service's own node
// ports, which an API server's allocator refuses too. It is called with s.mu held.
func (s *Reader) rejectConflicts(desired map[Key]applied, order []Key) []Problem {
	var first, rest []Key
	for _, key := range order {
		if _, ok := desired[key].obj.(*v1.Service); !ok {
			continue
		}
		if prev, ok := s.applied[key]; ok && equality.Semantic.DeepEqual(prev.obj, desired[key].obj) {
			first = append(first, key)
		} else {
			rest = append(rest, key)
		}
	}
	held := map[claim]holder{}
	var problems []Problem
	for _, key := range append(first, rest...) {
		d := desired[key]
		svc := d.obj.(*v1.Service)
		claims := serviceClaims(svc)
		var reason string
		for _, c := range claims {
			if h, taken := held[c.claim]; taken {
				reason = fmt.Sprintf("%s %s is already used by %s (%s at %s:%d); ignored", c.field, c.value, describeKey(h.key), h.field, h.file, h.line)
				break
			}
		}
		if hc := svc.Spec.HealthCheckNodePort; reason == "" && hc != 0 {
			c := claim{"nodePort", strconv.Itoa(int(hc))}
			if i := slices.IndexFunc(claims, func(fc fieldClaim) bool { return fc.claim == c }); i >= 0 {
				reason = fmt.Sprintf("spec.healthCheckNodePort %d is also %s; ignored", hc, claims[i].field)
			} else if h, taken := held[c]; taken {
				reason = fmt.Sprintf("spec.healthCheckNodePort %d is already used by %s (%s at %s:%d); ignored", hc, describeKey(h.key), h.field, h.file, h.line)
			} else {
				claims = append(claims, fieldClaim{c, "spec.healthCheckNodePort"})
			}
		}
		if reason != "" {
			problems = append(problems, Problem{File: d.file, Line: d.line, Object: describeKey(key), Reason: reason})
			delete(desired, key)
			continue
		}
		for _, c := range claims {
			held[c.claim] = holder{key: key, field: c.field, file: d.file, line: d.line}
		}
	}
	return problems
}

// describeKey names an object the way Problems do ("Service default/web").
func describeKey(key Key) string {
	kind := key.Resource
	for gvk, info := range supportedKinds {
		if info.gvr.Resource == key.Resource {
			kind = gvk.Kind
		}
	}
	if key.Namespace == "" {
		return kind + " " + key.Name
	}
	return kind + " " + key.Namespace + "/" + key.Name
}

// rejectOutOfRange removes from desired every Service with a cluster IP
// outside the ServiceCIDRs in desired, as an API server's allocator refuses
// it, and returns a Problem for each. Without any ServiceCIDR the range is
// not known (it is the API server's flag) and nothing is rejected. It is
// called with s.mu held.
func rejectOutOfRange(desired map[Key]applied, order []Key) []Problem {
	type serviceCIDR struct {
		prefix netip.Prefix
		name   string
	}
	var cidrs []serviceCIDR
	for _, key := range order {
		sc, ok := desired[key].obj.(*networkingv1.ServiceCIDR)
		if !ok {
			continue
		}
		for _, c := range sc.Spec.CIDRs {
			if _, n, err := netutils.ParseCIDRSloppy(c); err == nil {
				if p, ok := netipPrefix(n); ok {
					cidrs = append(cidrs, serviceCIDR{p, sc.Name})
				}
			}
		}
	}
	if len(cidrs) == 0 {
		return nil
	}
	var problems []Problem
	for _, key := range order {
		d, ok := desired[key]
		if !ok {
			continue
		}
		svc, ok := d.obj.(*v1.Service)
		if !ok || svc.Spec.ClusterIP == v1.ClusterIPNone || svc.Spec.Type == v1.ServiceTypeExternalName {
			continue
		}
		var errs field.ErrorList
		for i, ip := range svc.Spec.ClusterIPs {
			parsed := netutils.ParseIPSloppy(ip)
			addr, ok := netip.AddrFromSlice(parsed)
			if !ok {
				continue
			}
			addr = addr.Unmap()
			var ranges []string
			inside := false
			for _, c := range cidrs {
				if c.prefix.Addr().Is4() != addr.Is4() {
					continue
				}
				if c.prefix.Contains(addr) {
					inside = true
					break
				}
				ranges = append(ranges, fmt.Sprintf("%s (ServiceCIDR %s)", c.prefix, c.name))
			}
			if inside {
				continue
			}
			valid := strings.Join(ranges, ", ")
			if valid == "" {
				valid = "empty: no ServiceCIDR of this IP family"
			}
			// Upstream's allocator message (ipallocator.ErrNotInRange).
			errs = append(errs, field.Invalid(field.NewPath("spec", "clusterIPs").Index(i), ip,
				fmt.Sprintf("failed to allocate IP %s: the provided IP (%s) is not in the valid range. The range of valid IPs is %s", ip, ip, valid)))
		}
		if len(errs) > 0 {
			problems = append(problems, Problem{File: d.file, Line: d.line, Object: describeKey(key), Reason: errs.ToAggregate().Error()})
			delete(desired, key)
		}
	}
	return problems
}

func netipPrefix(n *net.IPNet) (netip.Prefix, bool) {
	addr, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	addr = addr.Unmap()
	return netip.PrefixFrom(addr, ones).Masked(), true
}
