package util

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/net-utils/sysctl"
	netutils "k8s.io/utils/net"
)

const (
	// IPv4ZeroCIDR matches every IPv4 address.
	IPv4ZeroCIDR = "0.0.0.0/0"
	// IPv6ZeroCIDR matches every IPv6 address.
	IPv6ZeroCIDR = "::/0"
	// FullSyncPeriod bounds how long a proxier may go on doing only partial
	// syncs; a full resync repairs anything changed behind our back.
	FullSyncPeriod = 1 * time.Hour
)

// IsZeroCIDR reports whether cidr has a zero-length prefix (0.0.0.0/0 or ::/0).
func IsZeroCIDR(cidr *net.IPNet) bool {
	if cidr == nil {
		return false
	}
	ones, _ := cidr.Mask.Size()
	return ones == 0
}

// isServiceIPSet reports whether the service has a real cluster IP: headless
// ("None") and unallocated ("") services have nothing for a proxy to program.
func isServiceIPSet(svc *v1.Service) bool {
	ip := svc.Spec.ClusterIP
	return ip != "" && ip != v1.ClusterIPNone
}

// ShouldSkipService reports whether a proxier should ignore service entirely:
// it is nil, headless, lacks a cluster IP, or is of type ExternalName.
func ShouldSkipService(service *v1.Service) bool {
	if service == nil {
		return true
	}
	if !isServiceIPSet(service) {
		klog.V(3).InfoS("Skipping service due to cluster IP", "service", klog.KObj(service), "clusterIP", service.Spec.ClusterIP)
		return true
	}
	if service.Spec.Type == v1.ServiceTypeExternalName {
		klog.V(3).InfoS("Skipping service due to Type=ExternalName", "service", klog.KObj(service))
		return true
	}
	return false
}

// addrIP extracts the IP from the address kinds net.InterfaceAddrs returns;
// anything else yields nil.
func addrIP(a net.Addr) net.IP {
	switch v := a.(type) {
	case *net.IPNet:
		return v.IP
	case *net.IPAddr:
		return v.IP
	}
	return nil
}

// AddressSet returns the string forms of the IPs in addrs accepted by isValid.
// Address kinds other than *net.IPNet and *net.IPAddr are ignored.
func AddressSet(isValid func(ip net.IP) bool, addrs []net.Addr) sets.Set[string] {
	out := sets.New[string]()
	for _, a := range addrs {
		ip := addrIP(a)
		if ip == nil {
			continue
		}
		if isValid(ip) {
			out.Insert(ip.String())
		}
	}
	return out
}

// MapIPsByIPFamily parses ipStrings and groups the valid ones by family.
// Invalid non-blank entries are logged and dropped.
func MapIPsByIPFamily(ipStrings []string) map[v1.IPFamily][]net.IP {
	out := map[v1.IPFamily][]net.IP{}
	for _, s := range ipStrings {
		ip := netutils.ParseIPSloppy(s)
		if ip == nil {
			if strings.TrimSpace(s) != "" {
				klog.ErrorS(nil, "Skipping invalid IP", "ip", s)
			}
			continue
		}
		fam := GetIPFamilyFromIP(ip)
		out[fam] = append(out[fam], ip)
	}
	return out
}

// MapCIDRsByIPFamily parses cidrsStrings (surrounding blanks allowed) and
// groups the valid ones by family. Invalid non-blank entries are logged and
// dropped.
func MapCIDRsByIPFamily(cidrsStrings []string) map[v1.IPFamily][]*net.IPNet {
	out := map[v1.IPFamily][]*net.IPNet{}
	for _, raw := range cidrsStrings {
		s := strings.TrimSpace(raw)
		_, cidr, err := netutils.ParseCIDRSloppy(s)
		if err != nil {
			if s != "" {
				klog.ErrorS(err, "Invalid CIDR ignored", "CIDR", s)
			}
			continue
		}
		fam := toV1Family(netutils.IPFamilyOfCIDR(cidr))
		out[fam] = append(out[fam], cidr)
	}
	return out
}

// GetIPFamilyFromIP returns the family of ip, or v1.IPFamilyUnknown for an
// invalid IP.
func GetIPFamilyFromIP(ip net.IP) v1.IPFamily {
	return toV1Family(netutils.IPFamilyOf(ip))
}

func toV1Family(f netutils.IPFamily) v1.IPFamily {
	switch f {
	case netutils.IPv4:
		return v1.IPv4Protocol
	case netutils.IPv6:
		return v1.IPv6Protocol
	}
	return v1.IPFamilyUnknown
}

// OtherIPFamily returns the family a dual-stack peer of ipFamily would use.
// Anything that is not IPv6 is treated as IPv4.
func OtherIPFamily(ipFamily v1.IPFamily) v1.IPFamily {
	if ipFamily == v1.IPv6Protocol {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// AppendPortIfNeeded returns addr unchanged if it already carries a port or is
// not an IP; otherwise it returns addr joined with port (IPv6 bracketed).
func AppendPortIfNeeded(addr string, port int32) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if netutils.ParseIPSloppy(addr) == nil {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(int(port)))
}

// EnsureSysctl sets sysctl name to newVal unless it already has that value.
// A read error is treated as "different" so we still attempt the write.
func EnsureSysctl(sysctl sysctl.Interface, name string, newVal int) error {
	oldVal, _ := sysctl.GetSysctl(name)
	if oldVal == newVal {
		return nil
	}
	if err := sysctl.SetSysctl(name, newVal); err != nil {
		return fmt.Errorf("can't set sysctl %s to %d: %w", name, newVal, err)
	}
	klog.V(1).InfoS("Changed sysctl", "name", name, "before", oldVal, "after", newVal)
	return nil
}

// GetClusterIPByFamily returns service's cluster IP of family ipFamily, or ""
// if it has none. Services written before dual-stack (no IPFamilies) are
// judged by the single ClusterIP field.
func GetClusterIPByFamily(ipFamily v1.IPFamily, service *v1.Service) string {
	if service == nil {
		return ""
	}
	if len(service.Spec.IPFamilies) == 0 {
		ip := service.Spec.ClusterIP
		if ip == "" || ip == v1.ClusterIPNone {
			return ""
		}
		if (ipFamily == v1.IPv6Protocol) == netutils.IsIPv6String(ip) {
			return ip
		}
		return ""
	}
	for i, fam := range service.Spec.IPFamilies {
		if fam == ipFamily && i < len(service.Spec.ClusterIPs) {
			return service.Spec.ClusterIPs[i]
		}
	}
	return ""
}

// IsVIPMode reports whether a load-balancer ingress IP should be handled as a
// VIP by kube-proxy; an unset IPMode means VIP for backward compatibility.
func IsVIPMode(ing v1.LoadBalancerIngress) bool {
	return ing.IPMode == nil || *ing.IPMode == v1.LoadBalancerIPModeVIP
}

// IPPart returns the IP of s, which is either a bare IP or "host:port".
// It logs and returns "" when no IP can be extracted.
func IPPart(s string) string {
	if netutils.ParseIPSloppy(s) != nil {
		return s
	}
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		klog.ErrorS(err, "Failed to parse host-port", "input", s)
		return ""
	}
	ip := netutils.ParseIPSloppy(host)
	if ip == nil {
		klog.ErrorS(nil, "Failed to parse IP", "input", host)
		return ""
	}
	return ip.String()
}
