//go:build linux

package app

import (
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
)

// The Linux modes, registered in one place; each mode's constructor is in
// its mode_*_linux.go.
func init() {
	proxierModes[kubeproxyconfig.ProxyModeIPTables] = proxierMode{dryRunKind: "iptables-restore input", newProxier: newIPTablesProxier}
	proxierModes[kubeproxyconfig.ProxyModeNFTables] = proxierMode{dryRunKind: "nft script", newProxier: newNFTablesProxier}
	proxierModes[kubeproxyconfig.ProxyModeIPVS] = proxierMode{dryRunKind: ipvsDryRunKind, newProxier: newIPVSProxier, checkAvailable: checkIPVSAvailable}
}

// dryRunOptions are the options every Linux mode's proxier gets for a dry
// run: the writer, and the node's addresses where they stand in for the
// host's interfaces. Nil when this is not a dry run.
func (f familySetup) dryRunOptions() []proxieropts.Option {
	if f.dryRun == nil {
		return nil
	}
	opts := []proxieropts.Option{proxieropts.WithDryRun(f.dryRun)}
	if f.nodeAddrs != nil {
		opts = append(opts, proxieropts.WithNetworkInterfacer(f.nodeAddrs))
	}
	return opts
}
