package app

// Upstream's Windows-only flags and defaults. They are registered on the command only by
// server_windows.go, but live in an untagged file so that the flags' names, types,
// defaults and the fields they set are tested on every platform (Windows test binaries
// are only compiled here, never run).

import (
	"net"

	"github.com/spf13/pflag"

	v1 "k8s.io/api/core/v1"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// defaultRootHnsEndpointName is the host's endpoint on the l2bridge network that
// upstream assumes when neither the flag nor the file names one.
const defaultRootHnsEndpointName = "cbr0"

// addWindowsFlags registers upstream's Windows-only flags on fs, bound to the winkernel
// and Windows sections of o's configuration.
func (o *Options) addWindowsFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.config.Windows.RunAsService, "windows-service", o.config.Windows.RunAsService,
		"Run under the Windows Service Control Manager: report the service's state to it and stop when it asks.")
	fs.StringVar(&o.config.Winkernel.SourceVip, "source-vip", o.config.Winkernel.SourceVip,
		"The source VIP's IP address: the address load-balanced traffic is NATed to when DSR is off.")
	fs.StringVar(&o.config.Winkernel.NetworkName, "network-name", o.config.Winkernel.NetworkName,
		"The name of the HNS network of the cluster, in which the load balancers and remote endpoints are created.")
	fs.BoolVar(&o.config.Winkernel.EnableDSR, "enable-dsr", o.config.Winkernel.EnableDSR,
		"If true, the Service VIPs' load balancers use direct server return (DSR).")
	// Upstream's default is the literal, not the configuration's (empty) value, so the
	// flag reads "cbr0" in --help and /flagz like upstream's.
	fs.StringVar(&o.config.Winkernel.RootHnsEndpointName, "root-hnsendpoint-name", defaultRootHnsEndpointName,
		"The name of the HNS endpoint of the host's (root) network namespace on an l2bridge network.")
	fs.BoolVar(&o.config.Winkernel.ForwardHealthCheckVip, "forward-healthcheck-vip", o.config.Winkernel.ForwardHealthCheckVip,
		"If true, the Service VIP is also forwarded on the health check node port.")
}

// applyWindowsDefaults fills in what Windows defaults once flags and file are merged:
// kernelspace is the only mode there, and a configuration file without
// winkernel.rootHnsEndpointName gets the flag's default.
func applyWindowsDefaults(cfg *kubeproxyconfig.KubeProxyConfiguration) {
	if cfg.Mode == "" {
		cfg.Mode = kubeproxyconfig.ProxyModeKernelspace
	}
	if cfg.Winkernel.RootHnsEndpointName == "" {
		cfg.Winkernel.RootHnsEndpointName = defaultRootHnsEndpointName
	}
}

// windowsNodeIPs gives the secondary family the unspecified address, whatever the Node
// says, because that is what upstream's winkernel proxier has always been handed for
// it and what its behaviour for the secondary family is built on.
func windowsNodeIPs(primary v1.IPFamily, nodeIPs map[v1.IPFamily]net.IP) {
	if primary == v1.IPv4Protocol {
		nodeIPs[v1.IPv6Protocol] = net.IPv6zero
	} else {
		nodeIPs[v1.IPv4Protocol] = net.IPv4zero
	}
}
