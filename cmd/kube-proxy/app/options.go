package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"k8s.io/apimachinery/pkg/runtime/schema"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	metricsfeatures "k8s.io/component-base/metrics/features"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"
	"k8s.io/utils/ptr"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	configv1alpha2 "k8s.io/kube-proxy/config/v1alpha2"
	"k8s.io/kube-proxy/pkg/features"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/loader"
	proxyconfigscheme "k8s.io/kube-proxy/pkg/proxy/apis/config/scheme"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/validation"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// Options holds everything needed to build and run a proxy server.
type Options struct {
	// ConfigFile is the path of the KubeProxyConfiguration file (--config).
	ConfigFile string
	// WriteConfigTo is where to write the effective configuration before exiting
	// (--write-config-to).
	WriteConfigTo string
	// CleanupAndExit removes the rules of every proxy mode, then exits (--cleanup).
	CleanupAndExit bool
	// InitAndExit does the steps that need full root privileges, then exits (--init-only).
	InitAndExit bool

	config *kubeproxyconfig.KubeProxyConfiguration

	// Set only for a --config file: reports its changes on errCh.
	watcher *configWatcher
	errCh   chan error

	// flags is kept for /flagz.
	flags *pflag.FlagSet

	// Flags that do not map onto KubeProxyConfiguration.
	master                string
	healthzPort           int32
	metricsPort           int32
	hostnameOverride      string
	iptablesSyncPeriod    time.Duration
	iptablesMinSyncPeriod time.Duration
	ipvsSyncPeriod        time.Duration
	ipvsMinSyncPeriod     time.Duration
	clusterCIDRs          string
	localNodeServe        localNodeServeOptions  // --localnode-serve and its TLS flags, localnode_serve.go
	localNodeSource       localNodeSourceOptions // --localnode-source and its TLS flags, localnode_source.go
	socketLB              socketLBOptions        // --socket-lb, socketlb.go

	// Additions to upstream's flag set.
	writeConfigVersion string
	manifests          string
	manifestsRescan    time.Duration
	dryRun             bool
	dryRunFollow       bool
	// dryRunNodeAddresses (hidden --dry-run-node-addresses) are the addresses a dry
	// run computes NodePorts for, or "host" for this host's interfaces even with
	// manifests: trace --netns runs a dry run inside the namespace it reads, to compare
	// with what kube-proxy there programmed, with trace's --local-addresses if given.
	dryRunNodeAddresses []string
	dryRunTimeout       time.Duration

	// --localnode-source-max-pending-*, localnode_source.go
	sourceLimits sourceLimits

	logger klog.Logger
}

// The config API versions --write-config-version accepts.
var writableVersions = map[string]schema.GroupVersion{
	"v1alpha1": configv1alpha1.SchemeGroupVersion,
	configv1alpha1.SchemeGroupVersion.String(): configv1alpha1.SchemeGroupVersion,
	"v1alpha2": configv1alpha2.SchemeGroupVersion,
	configv1alpha2.SchemeGroupVersion.String(): configv1alpha2.SchemeGroupVersion,
}

// AddFlags registers every upstream v1.37 flag (same names, types, defaults and
// deprecations) plus this build's additions on fs, bound to o.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.addOSFlags(fs)

	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "The path to the configuration file (KubeProxyConfiguration, kubeproxy.config.k8s.io/v1alpha1 or v1alpha2).")
	fs.StringVar(&o.WriteConfigTo, "write-config-to", o.WriteConfigTo, "If set, write the default configuration values to this file and exit.")
	fs.BoolVar(&o.CleanupAndExit, "cleanup", o.CleanupAndExit, "If true cleanup iptables and ipvs rules and exit. "+
		"On Linux it removes what every proxy mode programs, whatever --proxy-mode says: kube-proxy's iptables chains "+
		"(KUBE-SERVICES, KUBE-SVC-*, KUBE-PROXY-CANARY, ...) and their jumps from the built-in chains, IPv4 and IPv6; "+
		"every IPVS virtual server (also ones kube-proxy did not create), the kube-ipvs0 device and the ipvs mode's ip sets; "+
		"and the nftables tables 'ip kube-proxy' and 'ip6 kube-proxy'. It leaves the KUBE-FIREWALL chain and its jumps from INPUT and OUTPUT, "+
		"which kubelet owns (the iptables mode creates them too, as upstream's does, in case kubelet has not yet), conntrack entries and sysctls. "+
		"On Windows it deletes every HNS load balancer.")

	fs.Var(cliflag.NewMapStringBool(&o.config.FeatureGates), "feature-gates", "A set of key=value pairs that describe feature gates for alpha/experimental features. "+
		"Options are:\n"+strings.Join(features.DefaultFeatureGate.KnownFeatures(), "\n")+"\n"+
		"Gates of other Kubernetes components are accepted and ignored with a warning. "+
		"This parameter is ignored if a config file is specified by --config.")

	fs.StringVar(&o.config.ClientConnection.Kubeconfig, "kubeconfig", o.config.ClientConnection.Kubeconfig, "Path to kubeconfig file with authorization information (the master location can be overridden by the master flag).")
	fs.StringVar(&o.master, "master", o.master, "The address of the Kubernetes API server (overrides any value in kubeconfig)")
	fs.StringVar(&o.config.ClientConnection.ContentType, "kube-api-content-type", o.config.ClientConnection.ContentType, "Content type of requests sent to apiserver.")
	fs.Int32Var(&o.config.ClientConnection.Burst, "kube-api-burst", o.config.ClientConnection.Burst, "Burst to use while talking with kubernetes apiserver")
	fs.Float32Var(&o.config.ClientConnection.QPS, "kube-api-qps", o.config.ClientConnection.QPS, "QPS to use while talking with kubernetes apiserver")

	fs.StringVar(&o.hostnameOverride, "hostname-override", o.hostnameOverride, "If non-empty, will be used as the name of the Node that kube-proxy is running on. If unset, the node name is assumed to be the same as the node's hostname.")
	fs.Var(ipVar{&o.config.BindAddress}, "bind-address", "Overrides kube-proxy's idea of what its node's primary IP is. Note that the name is a historical artifact, and kube-proxy does not actually bind any sockets to this IP. This parameter is ignored if a config file is specified by --config.")
	fs.Var(ipPortVar{&o.config.HealthzBindAddress}, "healthz-bind-address", "The IP address and port for the health check server to serve on, defaulting to \"0.0.0.0:10256\". This parameter is ignored if a config file is specified by --config.")
	fs.Var(ipPortVar{&o.config.MetricsBindAddress}, "metrics-bind-address", "The IP address and port for the metrics server to serve on, defaulting to \"127.0.0.1:10249\". (Set to \"0.0.0.0:10249\" / \"[::]:10249\" to bind on all interfaces.) This parameter is ignored if a config file is specified by --config.")
	fs.BoolVar(&o.config.BindAddressHardFail, "bind-address-hard-fail", o.config.BindAddressHardFail, "If true kube-proxy will treat failure to bind to a port as fatal and exit")
	fs.BoolVar(&o.config.EnableProfiling, "profiling", o.config.EnableProfiling, "If true enables profiling via web interface on /debug/pprof handler. This parameter is ignored if a config file is specified by --config.")
	fs.StringVar(&o.config.ShowHiddenMetricsForVersion, "show-hidden-metrics-for-version", o.config.ShowHiddenMetricsForVersion,
		"The previous version for which you want to show hidden metrics. "+
			"Only the previous minor version is meaningful, other values will not be allowed. "+
			"The format is <major>.<minor>, e.g.: '1.16'. "+
			"The purpose of this format is make sure you have the opportunity to notice if the next release hides additional metrics, "+
			"rather than being surprised when they are permanently removed in the release after that. "+
			"This parameter is ignored if a config file is specified by --config.")
	fs.BoolVar(&o.InitAndExit, "init-only", o.InitAndExit, "If true, perform any initialization steps that must be done with full root privileges, and then exit. After doing this, you can run kube-proxy again with only the CAP_NET_ADMIN capability.")
	fs.Var(&o.config.Mode, "proxy-mode", "Which proxy mode to use: on Linux this can be 'iptables' (default), 'ipvs', or 'nftables'. On Windows the only supported value is 'kernelspace'. "+
		"(This build implements all four.) "+
		"This parameter is ignored if a config file is specified by --config.")

	fs.Int32Var(o.config.IPTables.MasqueradeBit, "iptables-masquerade-bit", ptr.Deref(o.config.IPTables.MasqueradeBit, 14), "If using the iptables or ipvs proxy mode, the bit of the fwmark space to mark packets requiring SNAT with.  Must be within the range [0, 31].")
	fs.BoolVar(&o.config.Linux.MasqueradeAll, "masquerade-all", o.config.Linux.MasqueradeAll, "SNAT all traffic sent via Service cluster IPs. This may be required with some CNI plugins. Only supported on Linux.")
	fs.BoolVar(o.config.IPTables.LocalhostNodePorts, "iptables-localhost-nodeports", ptr.Deref(o.config.IPTables.LocalhostNodePorts, true), "If false, kube-proxy will disable the legacy behavior of allowing NodePort services to be accessed via localhost. (Applies only to iptables mode and IPv4; localhost NodePorts are never allowed with other proxy modes or with IPv6.)")
	durationFlag(fs, &o.iptablesSyncPeriod, "iptables-sync-period", o.config.SyncPeriod.Duration, "An interval (e.g. '5s', '1m', '2h22m') indicating how frequently various re-synchronizing and cleanup operations are performed. Must be greater than 0.")
	durationFlag(fs, &o.iptablesMinSyncPeriod, "iptables-min-sync-period", o.config.MinSyncPeriod.Duration, "The minimum period between iptables rule resyncs (e.g. '5s', '1m', '2h22m'). A value of 0 means every Service or EndpointSlice change will result in an immediate iptables resync.")

	durationFlag(fs, &o.ipvsSyncPeriod, "ipvs-sync-period", o.config.SyncPeriod.Duration, "An interval (e.g. '5s', '1m', '2h22m') indicating how frequently various re-synchronizing and cleanup operations are performed. Must be greater than 0.")
	durationFlag(fs, &o.ipvsMinSyncPeriod, "ipvs-min-sync-period", o.config.MinSyncPeriod.Duration, "The minimum period between IPVS rule resyncs (e.g. '5s', '1m', '2h22m'). A value of 0 means every Service or EndpointSlice change will result in an immediate IPVS resync.")
	fs.StringVar(&o.config.IPVS.Scheduler, "ipvs-scheduler", o.config.IPVS.Scheduler, "The ipvs scheduler type when proxy mode is ipvs")
	fs.StringSliceVar(&o.config.IPVS.ExcludeCIDRs, "ipvs-exclude-cidrs", o.config.IPVS.ExcludeCIDRs, "A comma-separated list of CIDRs which the ipvs proxier should not touch when cleaning up IPVS rules.")
	fs.BoolVar(&o.config.IPVS.StrictARP, "ipvs-strict-arp", o.config.IPVS.StrictARP, "Enable strict ARP by setting arp_ignore to 1 and arp_announce to 2")
	durationFlag(fs, &o.config.IPVS.TCPTimeout.Duration, "ipvs-tcp-timeout", o.config.IPVS.TCPTimeout.Duration, "The timeout for idle IPVS TCP connections, 0 to leave as-is. (e.g. '5s', '1m', '2h22m').")
	durationFlag(fs, &o.config.IPVS.TCPFinTimeout.Duration, "ipvs-tcpfin-timeout", o.config.IPVS.TCPFinTimeout.Duration, "The timeout for IPVS TCP connections after receiving a FIN packet, 0 to leave as-is. (e.g. '5s', '1m', '2h22m').")
	durationFlag(fs, &o.config.IPVS.UDPTimeout.Duration, "ipvs-udp-timeout", o.config.IPVS.UDPTimeout.Duration, "The timeout for IPVS UDP packets, 0 to leave as-is. (e.g. '5s', '1m', '2h22m').")

	fs.Var(&o.config.DetectLocalMode, "detect-local-mode", "Mode to use to detect local traffic. This parameter is ignored if a config file is specified by --config.")
	fs.StringVar(&o.config.DetectLocal.BridgeInterface, "pod-bridge-interface", o.config.DetectLocal.BridgeInterface, "A bridge interface name. When --detect-local-mode is set to BridgeInterface, kube-proxy will consider traffic to be local if it originates from this bridge.")
	fs.StringVar(&o.config.DetectLocal.InterfaceNamePrefix, "pod-interface-name-prefix", o.config.DetectLocal.InterfaceNamePrefix, "An interface name prefix. When --detect-local-mode is set to InterfaceNamePrefix, kube-proxy will consider traffic to be local if it originates from any interface whose name begins with this prefix.")
	fs.StringVar(&o.clusterCIDRs, "cluster-cidr", strings.Join(o.config.DetectLocal.ClusterCIDRs, ","), "The CIDR range of the pods in the cluster. (For dual-stack clusters, this can be a comma-separated dual-stack pair of CIDR ranges.). When --detect-local-mode is set to ClusterCIDR, kube-proxy will consider traffic to be local if its source IP is in this range. (Otherwise it is not used.) "+
		"This parameter is ignored if a config file is specified by --config.")

	fs.StringSliceVar(&o.config.NodePortAddresses, "nodeport-addresses", o.config.NodePortAddresses,
		"A list of CIDR ranges and/or keywords that expand to CIDR ranges. NodePort services are only accessible on node IPs covered by the list. Supported keywords: 'primary' (the Node object's primary IPv4 and/or IPv6 addresses), 'localhost' (127.0.0.0/8 and ::1/128), and 'all' (0.0.0.0/0 and ::/0). Any combination of valid keywords and CIDRS may be included in the list. Serving NodePorts on loopback IPs is only supported in iptables mode (IPv4 only, see --iptables-localhost-nodeports), and, only for TCP, in nftables mode when the KubeProxyNFTablesLocalhostNodePorts feature gate is enabled and the list explicitly includes loopback (e.g. 'localhost'). If unset, this defaults to 'all' in iptables and ipvs mode, and to 'primary' in nftables mode. This parameter is ignored if a config file is specified by --config.")

	fs.Int32Var(o.config.Linux.OOMScoreAdj, "oom-score-adj", ptr.Deref(o.config.Linux.OOMScoreAdj, int32(kubeproxyconfig.KubeProxyOOMScoreAdj)), "The oom-score-adj value for kube-proxy process. Values must be within the range [-1000, 1000]. This parameter is ignored if a config file is specified by --config.")
	fs.Int32Var(o.config.Linux.Conntrack.MaxPerCore, "conntrack-max-per-core", *o.config.Linux.Conntrack.MaxPerCore,
		"Maximum number of NAT connections to track per CPU core (0 to leave the limit as-is and ignore conntrack-min).")
	fs.Int32Var(o.config.Linux.Conntrack.Min, "conntrack-min", *o.config.Linux.Conntrack.Min,
		"Minimum number of conntrack entries to allocate, regardless of conntrack-max-per-core (set conntrack-max-per-core=0 to leave the limit as-is).")
	durationFlag(fs, &o.config.Linux.Conntrack.TCPEstablishedTimeout.Duration, "conntrack-tcp-timeout-established", o.config.Linux.Conntrack.TCPEstablishedTimeout.Duration, "Idle timeout for established TCP connections (0 to leave as-is)")
	durationFlag(fs, &o.config.Linux.Conntrack.TCPCloseWaitTimeout.Duration, "conntrack-tcp-timeout-close-wait", o.config.Linux.Conntrack.TCPCloseWaitTimeout.Duration, "NAT timeout for TCP connections in the CLOSE_WAIT state")
	fs.BoolVar(&o.config.Linux.Conntrack.TCPBeLiberal, "conntrack-tcp-be-liberal", o.config.Linux.Conntrack.TCPBeLiberal, "Enable liberal mode for tracking TCP packets by setting nf_conntrack_tcp_be_liberal to 1")
	durationFlag(fs, &o.config.Linux.Conntrack.UDPTimeout.Duration, "conntrack-udp-timeout", o.config.Linux.Conntrack.UDPTimeout.Duration, "Idle timeout for UNREPLIED UDP connections (0 to leave as-is)")
	durationFlag(fs, &o.config.Linux.Conntrack.UDPStreamTimeout.Duration, "conntrack-udp-timeout-stream", o.config.Linux.Conntrack.UDPStreamTimeout.Duration, "Idle timeout for ASSURED UDP connections (0 to leave as-is)")
	durationFlag(fs, &o.config.ConfigSyncPeriod.Duration, "config-sync-period", o.config.ConfigSyncPeriod.Duration, "How often configuration from the apiserver is refreshed.  Must be greater than 0.")

	fs.Int32Var(&o.healthzPort, "healthz-port", o.healthzPort, "The port to bind the health check server. Use 0 to disable.")
	_ = fs.MarkDeprecated("healthz-port", "This flag is deprecated and will be removed in a future release. Please use --healthz-bind-address instead.")
	fs.Int32Var(&o.metricsPort, "metrics-port", o.metricsPort, "The port to bind the metrics server. Use 0 to disable.")
	_ = fs.MarkDeprecated("metrics-port", "This flag is deprecated and will be removed in a future release. Please use --metrics-bind-address instead.")

	// Additions to upstream's flags.
	fs.StringVar(&o.writeConfigVersion, "write-config-version", o.writeConfigVersion, "The config API version --write-config-to writes: 'v1alpha2' (the latest, KEP-784) or 'v1alpha1' (what upstream kube-proxy reads and writes).")
	fs.StringVar(&o.manifests, "manifests", o.manifests, "Run without a cluster: read Services, EndpointSlices, Nodes and ServiceCIDRs from this YAML/JSON file or directory (multi-document files and List kinds are accepted) instead of an API server, and follow changes to it. A bad document is reported with file:line and skipped; the rest applies. Use --hostname-override to say which Node in the manifests this is. Cannot be combined with --kubeconfig or --master.")
	durationFlag(fs, &o.manifestsRescan, "manifests-rescan-period", o.manifestsRescan, "With --manifests, how often to re-read every file even without a file-system notification.")
	addLocalNodeFlags(fs, &o.localNodeServe)
	addLocalNodeSourceFlags(fs, &o.localNodeSource)
	addLocalNodeSourceLimitFlags(fs, &o.sourceLimits)
	addSocketLBFlags(fs, &o.socketLB)
	fs.BoolVar(&o.dryRun, "dry-run", o.dryRun, "Print the rules the proxy mode would program (iptables-restore input, an nft script, or in ipvs mode the planned state as ip addr lines, ipvsadm-save -n, ipset save and iptables-save) after the first full sync and exit, without changing anything on this host. Works with an API server or with --manifests.")
	fs.BoolVar(&o.dryRunFollow, "dry-run-follow", o.dryRunFollow, "Like --dry-run, but keep running and print what every sync (full or partial) would program as it happens, following the API server or --manifests, until interrupted. Implies --dry-run.")
	fs.StringSliceVar(&o.dryRunNodeAddresses, "dry-run-node-addresses", nil, "With --dry-run, compute NodePorts for these addresses, or for this host's interfaces with \"host\", even with --manifests (used by trace --netns).")
	_ = fs.MarkHidden("dry-run-node-addresses")
	durationFlag(fs, &o.dryRunTimeout, "dry-run-timeout", o.dryRunTimeout, "How long --dry-run may take, from start-up (including waiting for an unreachable API server) to printing the first full sync, before it gives up with an error saying what was still pending (Services or EndpointSlices not yet listed, or which IP families had not finished syncing). With --dry-run-follow it bounds start-up only.")

	logsapi.AddFlags(&o.config.Logging, fs)
}

// newKubeProxyConfiguration returns the defaults of a v1alpha1 file with nothing in it,
// which is what upstream binds its flags to.
func newKubeProxyConfiguration() *kubeproxyconfig.KubeProxyConfiguration {
	versioned := &configv1alpha1.KubeProxyConfiguration{}
	proxyconfigscheme.Scheme.Default(versioned)
	internal, err := proxyconfigscheme.Scheme.ConvertToVersion(versioned, kubeproxyconfig.SchemeGroupVersion)
	if err != nil {
		panic(fmt.Sprintf("defaulting an empty configuration cannot fail, but did: %v", err))
	}
	return internal.(*kubeproxyconfig.KubeProxyConfiguration)
}

// NewOptions returns Options with upstream's defaults.
func NewOptions() *Options {
	return &Options{
		config:             newKubeProxyConfiguration(),
		healthzPort:        kubeproxyconfig.ProxyHealthzPort,
		metricsPort:        kubeproxyconfig.ProxyStatusPort,
		writeConfigVersion: "v1alpha2",
		manifestsRescan:    10 * time.Second,
		dryRunTimeout:      5 * time.Minute,
		errCh:              make(chan error),
		logger:             klog.FromContext(context.Background()),
	}
}

// Complete resolves the effective configuration: the config file if given (with
// logging flags and --hostname-override on top), else the flags; then platform
// defaults and feature gates.
func (o *Options) Complete(fs *pflag.FlagSet) error {
	o.flags = fs
	if o.dryRunFollow {
		o.dryRun = true
	}
	if o.ConfigFile == "" && o.WriteConfigTo == "" {
		o.config.HealthzBindAddress = addressFromDeprecatedFlags(o.config.HealthzBindAddress, o.healthzPort)
		o.config.MetricsBindAddress = addressFromDeprecatedFlags(o.config.MetricsBindAddress, o.metricsPort)
	}

	if o.ConfigFile != "" {
		c, err := o.loadConfigFromFile(o.ConfigFile)
		if err != nil {
			return err
		}
		// Logging flags given on the command line beat the file's logging section,
		// so that `--config f -v=5` works.
		if err := copyLogsFromFlags(fs, &c.Logging); err != nil {
			return err
		}
		o.config = c
		if !o.dryRun {
			w, err := newConfigWatcher(o.ConfigFile)
			if err != nil {
				return err
			}
			o.watcher = w
		}
	} else {
		o.processV1Alpha1Flags(fs)
	}

	o.platformApplyDefaults(o.config)
	o.applyLocalNodeServeFlags(fs)
	o.applySocketLBFlags(fs)

	if err := o.processHostnameOverrideFlag(); err != nil {
		return err
	}
	if err := features.SetFromMap(o.logger, o.config.FeatureGates); err != nil {
		return fmt.Errorf("featureGates: %w", err)
	}
	// Must follow the gates and precede the registration of any histogram.
	metricsfeatures.ApplyFeatureGates(features.DefaultFeatureGate)
	return nil
}

// copyLogsFromFlags copies the logging flags that were set on the command line onto
// to; vmodule entries from the flags come first so they win.
func copyLogsFromFlags(from *pflag.FlagSet, to *logsapi.LoggingConfiguration) error {
	var clone pflag.FlagSet
	logsapi.AddFlags(to, &clone)
	fileVModule := to.VModule
	to.VModule = nil
	var err error
	clone.VisitAll(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		src := from.Lookup(f.Name)
		if src == nil || !src.Changed {
			return
		}
		if setErr := f.Value.Set(src.Value.String()); setErr != nil {
			err = fmt.Errorf("copying flag --%s: %w", f.Name, setErr)
		}
	})
	to.VModule = append(to.VModule, fileVModule...)
	return err
}

// applyLocalNodeServeFlags puts the --localnode-serve flags given on the command line
// over the configuration's localNode section (which a v1alpha2 file may set), and
// takes the effective values back for the server.
func (o *Options) applyLocalNodeServeFlags(fs *pflag.FlagSet) {
	ln := &o.config.LocalNode
	for _, f := range []struct {
		flag     string
		from, to *string
	}{
		{"localnode-serve", &o.localNodeServe.address, &ln.ServeAddress},
		{"localnode-serve-tls-cert-file", &o.localNodeServe.certFile, &ln.TLSCertFile},
		{"localnode-serve-tls-private-key-file", &o.localNodeServe.keyFile, &ln.TLSPrivateKeyFile},
		{"localnode-serve-client-ca-file", &o.localNodeServe.clientCAFile, &ln.ClientCAFile},
	} {
		if fs.Changed(f.flag) {
			*f.to = *f.from
		}
	}
	o.localNodeServe = localNodeServeOptions{
		address: ln.ServeAddress, certFile: ln.TLSCertFile, keyFile: ln.TLSPrivateKeyFile, clientCAFile: ln.ClientCAFile,
	}
}

func (o *Options) processHostnameOverrideFlag() error {
	if o.hostnameOverride == "" {
		return nil
	}
	name := strings.TrimSpace(o.hostnameOverride)
	if name == "" {
		return fmt.Errorf("--hostname-override %q is invalid: empty after trimming spaces", o.hostnameOverride)
	}
	o.config.HostnameOverride = strings.ToLower(name)
	return nil
}

// processV1Alpha1Flags maps the flags that have no single config field.
func (o *Options) processV1Alpha1Flags(fs *pflag.FlagSet) {
	ipvs := o.config.Mode == kubeproxyconfig.ProxyModeIPVS
	if fs.Changed("iptables-sync-period") && !ipvs {
		o.config.SyncPeriod.Duration = o.iptablesSyncPeriod
	}
	if fs.Changed("iptables-min-sync-period") && !ipvs {
		o.config.MinSyncPeriod.Duration = o.iptablesMinSyncPeriod
	}
	if fs.Changed("ipvs-sync-period") && ipvs {
		o.config.SyncPeriod.Duration = o.ipvsSyncPeriod
	}
	if fs.Changed("ipvs-min-sync-period") && ipvs {
		o.config.MinSyncPeriod.Duration = o.ipvsMinSyncPeriod
	}
	if fs.Changed("cluster-cidr") {
		o.config.DetectLocal.ClusterCIDRs = strings.Split(o.clusterCIDRs, ",")
	}
}

// Validate checks the effective configuration and the flags' combinations.
func (o *Options) Validate() error {
	var errs []error
	for _, v := range o.dryRunNodeAddresses {
		if v != "host" && netutils.ParseIPSloppy(v) == nil {
			errs = append(errs, fmt.Errorf("--dry-run-node-addresses %q: %q is neither an IP address nor \"host\"", strings.Join(o.dryRunNodeAddresses, ","), v))
		}
	}
	if verrs := validation.Validate(o.config); len(verrs) > 0 {
		errs = append(errs, verrs.ToAggregate())
	}
	// Writing a config or cleaning up needs no proxier, so any valid mode will do.
	if o.WriteConfigTo == "" && !o.CleanupAndExit {
		if err := checkModeImplemented(o.config.Mode); err != nil {
			errs = append(errs, err)
		}
	}
	if _, ok := writableVersions[o.writeConfigVersion]; !ok {
		errs = append(errs, fmt.Errorf("--write-config-version %q is not supported: use v1alpha1 or v1alpha2", o.writeConfigVersion))
	}
	if o.manifests != "" && (o.master != "" || o.config.ClientConnection.Kubeconfig != "") {
		errs = append(errs, fmt.Errorf("--manifests %q cannot be combined with --kubeconfig or --master: it replaces the API server", o.manifests))
	}
	if err := validateLocalNodeSource(o.localNodeSource, o.config.ClientConnection.Kubeconfig, o.master, o.manifests, o.localNodeServe.address); err != nil {
		errs = append(errs, err)
	} else if _, err := o.localNodeSource.tlsConfig(); err != nil {
		errs = append(errs, err)
	}
	serveErr := validateLocalNodeServe(o.localNodeServe)
	if serveErr == nil {
		// Read now, so a missing or bad file fails before anything changes on the host.
		_, serveErr = o.localNodeServe.tlsConfig()
	}
	if serveErr != nil && o.ConfigFile != "" && o.config.LocalNode != (kubeproxyconfig.KubeProxyLocalNodeConfiguration{}) {
		// The messages name the flags; the values may have come from the file.
		serveErr = fmt.Errorf("%w (the --localnode-serve flags or, where not given, localNode in --config %q)", serveErr, o.ConfigFile)
	}
	if serveErr != nil {
		errs = append(errs, serveErr)
	}
	if err := validateLocalNodeSourceLimits("localnode-source-", o.sourceLimits); err != nil {
		errs = append(errs, err)
	}
	if o.manifestsRescan <= 0 {
		errs = append(errs, fmt.Errorf("--manifests-rescan-period %v must be greater than 0", o.manifestsRescan))
	}
	if o.dryRunTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--dry-run-timeout %v must be greater than 0", o.dryRunTimeout))
	}
	if o.dryRun && (o.CleanupAndExit || o.InitAndExit) {
		errs = append(errs, errors.New("--dry-run cannot be combined with --cleanup or --init-only, which change the host"))
	}
	for _, w := range validation.Warnings(o.config) {
		logWarning("Configuration warning", "warning", w)
	}
	return errors.Join(errs...)
}

// Run writes the config, cleans up, or runs the proxy server until ctx is done or a
// fatal error (including a change of the --config file).
func (o *Options) Run(ctx context.Context) error {
	if o.WriteConfigTo != "" {
		return o.writeConfigFile()
	}

	if !o.dryRun && !o.CleanupAndExit {
		if err := checkModeAvailable(ctx, o.config); err != nil {
			return err
		}
	}
	if !o.dryRun {
		err := platformCleanup(ctx, o.config.Mode, o.CleanupAndExit, o.socketLB)
		if o.CleanupAndExit {
			return err
		}
		// Otherwise best effort: the backends log what they could not remove.
	}

	// A dry run is a one-off command: bounded as a whole, so that it ends with
	// a reason rather than waiting forever for an API server or a sync.
	disarmDeadline := func() {}
	if o.dryRun {
		var cancel context.CancelFunc
		ctx, disarmDeadline, cancel = withDryRunDeadline(ctx, o.dryRunTimeout)
		defer cancel()
		if o.manifests == "" && o.localNodeSource.address == "" {
			client, err := createClient(ctx, o.config.ClientConnection, o.master)
			if err != nil {
				return err
			}
			if err := waitForAPIServer(ctx, client); err != nil {
				if dryRunDeadlineOf(ctx) == nil && ctx.Err() != nil {
					o.logger.Info("Shutting down before the dry run started", "reason", err)
					return nil
				}
				return err
			}
		}
	}

	s, err := newProxyServer(ctx, o.config, serverOptions{
		master:          o.master,
		initOnly:        o.InitAndExit,
		manifests:       o.manifests,
		manifestsRescan: o.manifestsRescan,
		dryRun:          o.dryRun,
		dryRunFollow:    o.dryRunFollow,
		flags:           o.flags,
		localNodeServe:  o.localNodeServe,
		localNodeSource: o.localNodeSource,
		socketLB:        o.socketLB,
		sourceLimits:    o.sourceLimits,
		hostAddresses:   slices.Equal(o.dryRunNodeAddresses, []string{"host"}),
		localAddresses:  dryRunNodeIPs(o.dryRunNodeAddresses),
	})
	if err != nil {
		if deadline := dryRunDeadlineOf(ctx); deadline != nil {
			return fmt.Errorf("%w while starting: %w", deadline, err)
		}
		if ctx.Err() != nil {
			// Stopped while starting (e.g. waiting for an unreachable API server).
			o.logger.Info("Shutting down before the proxy started", "reason", err)
			return nil
		}
		return err
	}
	if o.InitAndExit {
		return nil
	}
	if o.dryRunFollow {
		// Started; following lasts until interrupted.
		disarmDeadline()
	}
	return o.runLoop(ctx, s)
}

func (o *Options) runLoop(ctx context.Context, s *ProxyServer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.watcher != nil {
		o.watcher.run(ctx, o.errCh)
	}
	go func() {
		err := s.Run(ctx)
		select {
		case o.errCh <- err:
		case <-ctx.Done():
		}
	}()
	select {
	case err := <-o.errCh:
		return err
	case <-ctx.Done():
		if deadline := dryRunDeadlineOf(ctx); deadline != nil {
			// s.Run reports the same, but its report may lose the race with ctx.
			return s.dryRun.deadlineError(deadline, time.Now())
		}
		// A signal: leave every rule in place so traffic keeps flowing until the
		// next kube-proxy takes over.
		if o.dryRun {
			o.logger.Info("Shutting down; this was a dry run, nothing was programmed")
			return nil
		}
		o.logger.Info("Shutting down; programmed rules are left in place")
		return nil
	}
}

func (o *Options) writeConfigFile() error {
	gv := writableVersions[o.writeConfigVersion]
	data, err := loader.Encode(o.config, gv)
	if err != nil {
		return fmt.Errorf("encoding the configuration as %s: %w", gv, err)
	}
	for _, w := range validation.EncodingWarnings(o.config, gv) {
		o.logger.Info("Not representable in the written version", "version", gv.String(), "warning", w)
	}
	if err := os.WriteFile(o.WriteConfigTo, data, 0o644); err != nil {
		return fmt.Errorf("--write-config-to %q: %w", o.WriteConfigTo, err)
	}
	o.logger.Info("Wrote configuration", "file", o.WriteConfigTo, "version", gv.String())
	return nil
}

// addressFromDeprecatedFlags applies --healthz-port/--metrics-port: 0 disables the
// server, otherwise the port is used when the address has none.
func addressFromDeprecatedFlags(addr string, port int32) string {
	if port == 0 {
		return ""
	}
	return proxyutil.AppendPortIfNeeded(addr, port)
}

// loadConfigFromFile reads either config version. Unknown or duplicate fields are
// fatal unless the file's configHardFail is false (so for v1alpha1 unless the file
// says configHardFail: true, matching upstream's lenient retry), in which case they
// are logged as warnings.
func (o *Options) loadConfigFromFile(path string) (*kubeproxyconfig.KubeProxyConfiguration, error) {
	cfg, warnings, err := loader.LoadFile(path, loader.Options{HonorConfigHardFail: true})
	if err != nil {
		return nil, fmt.Errorf("--config %q: %w", path, err)
	}
	for _, w := range warnings {
		logWarning("Configuration file warning", "file", path, "warning", w)
	}
	return cfg, nil
}

// logWarning logs at klog's warning severity (W in the text format). Structured
// logging has only Info and Error, and configuration that is read but ignored
// must stand out from the informational lines around it without being an error;
// the key/value pairs are rendered as the structured text format would.
func logWarning(msg string, keysAndValues ...any) {
	var b strings.Builder
	b.WriteString(strconv.Quote(msg))
	for i := 0; i < len(keysAndValues); i += 2 {
		key := fmt.Sprint(keysAndValues[i])
		var value any = "(MISSING)"
		if i+1 < len(keysAndValues) {
			value = keysAndValues[i+1]
		}
		fmt.Fprintf(&b, " %s=%s", key, strconv.Quote(fmt.Sprint(value)))
	}
	klog.WarningDepth(1, b.String())
}

// dryRunNodeIPs are the addresses of --dry-run-node-addresses; validate refuses any
// value that is neither an IP nor "host".
func dryRunNodeIPs(values []string) []net.IP {
	var ips []net.IP
	for _, v := range values {
		if ip := netutils.ParseIPSloppy(v); ip != nil {
			ips = append(ips, ip)
		}
	}
	return ips
}
