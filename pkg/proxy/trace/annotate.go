package trace

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// kube-proxy's iptables comments start with or contain "namespace/name:port"
// (or "namespace/name" when the port is unnamed); an endpoint rule says
// "... -> ip:port".
var (
	svcInComment = regexp.MustCompile(`(?:^|\s)([a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[-a-z0-9]+)?)(\s|$)`)
	epInComment  = regexp.MustCompile(`-> (\S+)$`)
)

// annotateComment returns the Service and endpoint an iptables rule comment
// names.
func annotateComment(comment string) (svc, ep string) {
	if m := svcInComment.FindStringSubmatch(comment); m != nil {
		svc = m[1]
	}
	if m := epInComment.FindStringSubmatch(comment); m != nil {
		if _, err := netip.ParseAddrPort(m[1]); err == nil {
			ep = m[1]
		}
	}
	return svc, ep
}

// nftChainPrefixes are the per-service chain kinds of kube-proxy's nftables
// backend; their names are "<kind>-<HASH>-<ns>/<name>/<proto>/<port>",
// endpoint chains adding "__<ip>/<port>".
var nftChainPrefixes = []string{"service-", "external-", "local-", "firewall-", "endpoint-", "cluster-", "affinity-"}

// annotateNFTName returns the Service ("ns/name:port") and endpoint an
// nftables chain or set name belongs to.
func annotateNFTName(name string) (svc, ep string) {
	var rest string
	found := false
	for _, p := range nftChainPrefixes {
		if r, ok := strings.CutPrefix(name, p); ok {
			rest, found = r, true
			break
		}
	}
	if !found {
		return "", ""
	}
	_, rest, ok := strings.Cut(rest, "-") // the hash
	if !ok {
		return "", ""
	}
	svcPart, epPart, hasEP := strings.Cut(rest, "__")
	f := strings.Split(svcPart, "/")
	if len(f) != 4 {
		return "", ""
	}
	svc = f[0] + "/" + f[1] + ":" + f[3]
	if hasEP {
		if i := strings.LastIndex(epPart, "/"); i > 0 {
			if a, err := netip.ParseAddr(epPart[:i]); err == nil {
				ep = hostPortString(a.String(), parsePortOrZero(epPart[i+1:]))
			}
		}
	}
	return svc, ep
}

func parsePortOrZero(s string) uint16 {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0
	}
	return uint16(n)
}

// iptablesOwned reports whether kube-proxy owns an iptables chain.
func iptablesOwned(chain string) bool {
	return strings.HasPrefix(chain, "KUBE-")
}

// HasKubeProxyRules reports whether a ruleset holds anything kube-proxy
// programs: its nat KUBE-SERVICES chain (iptables and ipvs modes), or a
// table of its own with chains (nftables). Other KUBE-* chains do not count:
// kubelet creates some (KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY,
// KUBE-FIREWALL) on nodes where kube-proxy has programmed nothing.
func HasKubeProxyRules(t Tracer) bool {
	switch r := t.(type) {
	case *IPTables:
		return r != nil && r.Tables["nat"]["KUBE-SERVICES"] != nil
	case *IPVS:
		return r != nil && HasKubeProxyRules(r.IPTables)
	case *NFTables:
		if r == nil {
			return false
		}
		for _, tb := range r.Tables {
			if tb.Name == r.Owner && len(tb.Chains) > 0 {
				return true
			}
		}
	}
	return false
}
