package util

import netutils "k8s.io/utils/net"

// LocalTrafficDetector yields the rule fragments that tell traffic coming
// from local pods apart from other traffic, in iptables and nftables syntax.
type LocalTrafficDetector interface {
	// IsImplemented is false for the no-op detector, whose fragments are empty.
	IsImplemented() bool
	// IfLocal matches pod-originated traffic (iptables arguments).
	IfLocal() []string
	// IfNotLocal matches the complement of IfLocal (iptables arguments).
	IfNotLocal() []string
	// IfLocalNFT is IfLocal as nftables expression words.
	IfLocalNFT() []string
	// IfNotLocalNFT is IfNotLocal as nftables expression words.
	IfNotLocalNFT() []string
}

type localDetector struct {
	local, notLocal, localNFT, notLocalNFT []string
}

func (d *localDetector) IsImplemented() bool     { return len(d.local) > 0 }
func (d *localDetector) IfLocal() []string       { return d.local }
func (d *localDetector) IfNotLocal() []string    { return d.notLocal }
func (d *localDetector) IfLocalNFT() []string    { return d.localNFT }
func (d *localDetector) IfNotLocalNFT() []string { return d.notLocalNFT }

// NewNoOpLocalDetector returns a detector that cannot tell local traffic
// apart; every fragment is empty.
func NewNoOpLocalDetector() LocalTrafficDetector {
	return &localDetector{}
}

// NewDetectLocalByCIDR treats traffic sourced from cidr as local.
// The caller is expected to have validated cidr.
func NewDetectLocalByCIDR(cidr string) LocalTrafficDetector {
	fam := "ip"
	if netutils.IsIPv6CIDRString(cidr) {
		fam = "ip6"
	}
	return &localDetector{
		local:       []string{"-s", cidr},
		notLocal:    []string{"!", "-s", cidr},
		localNFT:    []string{fam, "saddr", cidr},
		notLocalNFT: []string{fam, "saddr", "!=", cidr},
	}
}

// NewDetectLocalByBridgeInterface treats traffic entering through the named
// bridge as local.
func NewDetectLocalByBridgeInterface(interfaceName string) LocalTrafficDetector {
	return &localDetector{
		local:       []string{"-i", interfaceName},
		notLocal:    []string{"!", "-i", interfaceName},
		localNFT:    []string{"iifname", interfaceName},
		notLocalNFT: []string{"iifname", "!=", interfaceName},
	}
}

// NewDetectLocalByInterfaceNamePrefix treats traffic entering through any
// interface whose name starts with interfacePrefix (e.g. "veth") as local.
func NewDetectLocalByInterfaceNamePrefix(interfacePrefix string) LocalTrafficDetector {
	ipt := interfacePrefix + "+"
	nft := interfacePrefix + "*"
	return &localDetector{
		local:       []string{"-i", ipt},
		notLocal:    []string{"!", "-i", ipt},
		localNFT:    []string{"iifname", nft},
		notLocalNFT: []string{"iifname", "!=", nft},
	}
}
