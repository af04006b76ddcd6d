//go:build linux

package app

import "k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"

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
