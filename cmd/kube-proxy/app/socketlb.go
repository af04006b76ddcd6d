package app

import (
	"fmt"

	"github.com/spf13/pflag"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// socketLBOptions are --socket-lb and --socket-lb-cgroup-path: socket-level load
// balancing (pkg/proxy/ebpf) for clients on this node, beside the nftables or iptables
// mode, which keeps handling everything the socket hooks cannot see.
type socketLBOptions struct {
	enabled    bool
	cgroupPath string
}

func addSocketLBFlags(fs *pflag.FlagSet, o *socketLBOptions) {
	fs.BoolVar(&o.enabled, "socket-lb", o.enabled, "Linux only: also load-balance Services at the socket for clients on this node, with cgroup BPF programs that translate the Service address when a socket connects or sends (ClusterIPs, and for local clients NodePorts, externalIPs and load-balancer IPs), so their packets go straight to the endpoint without NAT. Requires --proxy-mode nftables or iptables, which keep handling traffic from other hosts. The programs and maps are pinned under /sys/fs/bpf/kube-proxy-socketlb and re-adopted by the next start; --cleanup removes them.")
	fs.StringVar(&o.cgroupPath, "socket-lb-cgroup-path", o.cgroupPath, "With --socket-lb, the cgroup v2 directory whose processes' sockets are load-balanced (and its descendants'). Empty: the cgroup v2 root, /sys/fs/cgroup/unified on a hybrid host.")
}

func validateSocketLB(o socketLBOptions, mode kubeproxyconfig.ProxyMode) error {
	if !o.enabled {
		if o.cgroupPath != "" {
			return fmt.Errorf("--socket-lb-cgroup-path %q requires --socket-lb", o.cgroupPath)
		}
		return nil
	}
	// An empty mode is the platform default, iptables on Linux.
	if mode != kubeproxyconfig.ProxyModeNFTables && mode != kubeproxyconfig.ProxyModeIPTables && mode != "" {
		return fmt.Errorf("--socket-lb requires --proxy-mode nftables or iptables, not %q: the socket hooks only see this node's clients", mode)
	}
	return nil
}
