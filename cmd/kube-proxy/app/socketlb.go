package app

import (
	"github.com/spf13/pflag"
)

// socketLBOptions are --socket-lb and --socket-lb-cgroup-path: socket-level load
// balancing (pkg/proxy/ebpf) for clients on this node, beside the nftables or iptables
// mode, which keeps handling everything the socket hooks cannot see. A v1alpha2 config
// file sets the same as socketLB.enabled and socketLB.cgroupPath; validation
// (pkg/proxy/apis/config/validation) checks the effective values.
type socketLBOptions struct {
	enabled    bool
	cgroupPath string
	// pinPath is where the maps and links are pinned; empty is ebpf.DefaultPinPath.
	// There is no flag for it: tests point it at a private bpf filesystem.
	pinPath string
}

func addSocketLBFlags(fs *pflag.FlagSet, o *socketLBOptions) {
	fs.BoolVar(&o.enabled, "socket-lb", o.enabled, "Linux only: also load-balance Services at the socket for clients on this node, with cgroup BPF programs that translate the Service address when a socket connects or sends (ClusterIPs, and for local clients NodePorts, externalIPs and load-balancer IPs; TCP and UDP, SCTP stays with the rules), so their packets go straight to the endpoint without NAT. Requires --proxy-mode nftables or iptables, which keep handling traffic from other hosts. The programs and maps are pinned under /sys/fs/bpf/kube-proxy-socketlb and re-adopted by the next start; a start without it, and --cleanup, remove them. A v1alpha2 --config file can set this as socketLB.enabled; the flag, when given, wins.")
	fs.StringVar(&o.cgroupPath, "socket-lb-cgroup-path", o.cgroupPath, "With --socket-lb, the cgroup v2 directory whose processes' sockets are load-balanced (and its descendants'), an absolute path. Empty: the root of the unified hierarchy, /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host. A v1alpha2 --config file can set this as socketLB.cgroupPath; the flag, when given, wins.")
}

// applySocketLBFlags puts the --socket-lb flags given on the command line over the
// configuration's socketLB section (which a v1alpha2 file may set), and takes the
// effective values back, so that the flags and the file can never disagree about what
// runs: the configuration is what is validated and what --write-config-to writes.
func (o *Options) applySocketLBFlags(fs *pflag.FlagSet) {
	sl := &o.config.SocketLB
	if fs.Changed("socket-lb") {
		sl.Enabled = o.socketLB.enabled
	}
	if fs.Changed("socket-lb-cgroup-path") {
		sl.CgroupPath = o.socketLB.cgroupPath
	}
	o.socketLB.enabled, o.socketLB.cgroupPath = sl.Enabled, sl.CgroupPath
}
