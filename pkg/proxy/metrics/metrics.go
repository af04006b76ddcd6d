package metrics

import (
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"k8s.io/kube-proxy/pkg/features"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

const subsystem = "kubeproxy"

// syncBuckets spans 1ms to ~16s, doubling.
func syncBuckets() []float64 { return metrics.ExponentialBuckets(0.001, 2, 15) }

func histogramVec(name, help string, buckets []float64, labels ...string) *metrics.HistogramVec {
	return metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: subsystem, Name: name, Help: help, Buckets: buckets, StabilityLevel: metrics.ALPHA,
	}, labels)
}

func gaugeVec(name, help string, labels ...string) *metrics.GaugeVec {
	return metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: subsystem, Name: name, Help: help, StabilityLevel: metrics.ALPHA,
	}, labels)
}

func counterVec(name, help string, labels ...string) *metrics.CounterVec {
	return metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: name, Help: help, StabilityLevel: metrics.ALPHA,
	}, labels)
}

var (
	// SyncProxyRulesLatency observes every rule sync, full or partial.
	SyncProxyRulesLatency = histogramVec("sync_proxy_rules_duration_seconds",
		"SyncProxyRules latency in seconds", syncBuckets(), "ip_family")

	// SyncFullProxyRulesLatency observes full rule syncs only.
	SyncFullProxyRulesLatency = histogramVec("sync_full_proxy_rules_duration_seconds",
		"SyncProxyRules latency in seconds for full resyncs", syncBuckets(), "ip_family")

	// SyncPartialProxyRulesLatency observes partial rule syncs only.
	SyncPartialProxyRulesLatency = histogramVec("sync_partial_proxy_rules_duration_seconds",
		"SyncProxyRules latency in seconds for partial resyncs", syncBuckets(), "ip_family")

	// SyncProxyRulesLastTimestamp is when rules were last synced successfully.
	SyncProxyRulesLastTimestamp = gaugeVec("sync_proxy_rules_last_timestamp_seconds",
		"The last time proxy rules were successfully synced", "ip_family")

	// NetworkProgrammingLatency measures from the moment a Service or pod
	// changed (as stamped by the EndpointSlice controller, so subject to clock
	// skew between nodes) until kube-proxy programmed the change. It backs the
	// Kubernetes network programming latency SLO.
	NetworkProgrammingLatency = histogramVec("network_programming_duration_seconds",
		"In Cluster Network Programming Latency in seconds",
		metrics.MergeBuckets(
			metrics.LinearBuckets(0.25, 0.25, 2), // 0.25s, 0.5s
			metrics.LinearBuckets(1, 1, 59),      // 1s .. 59s
			metrics.LinearBuckets(60, 5, 12),     // 60s .. 115s
			metrics.LinearBuckets(120, 30, 7),    // 2min .. 5min
		), "ip_family")

	// EndpointChangesPending counts endpoint changes not yet synced.
	EndpointChangesPending = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem: subsystem, Name: "sync_proxy_rules_endpoint_changes_pending",
		Help: "Pending proxy rules Endpoint changes", StabilityLevel: metrics.ALPHA,
	})

	// EndpointChangesTotal counts every endpoint change seen.
	EndpointChangesTotal = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "sync_proxy_rules_endpoint_changes_total",
		Help: "Cumulative proxy rules Endpoint changes", StabilityLevel: metrics.ALPHA,
	})

	// ServiceChangesPending counts service changes not yet synced.
	ServiceChangesPending = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem: subsystem, Name: "sync_proxy_rules_service_changes_pending",
		Help: "Pending proxy rules Service changes", StabilityLevel: metrics.ALPHA,
	})

	// ServiceChangesTotal counts every service change seen.
	ServiceChangesTotal = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "sync_proxy_rules_service_changes_total",
		Help: "Cumulative proxy rules Service changes", StabilityLevel: metrics.ALPHA,
	})

	// IPTablesCTStateInvalidDroppedNFAcctCounter is the nfacct counter the
	// iptables proxier attaches to its "drop ctstate INVALID" rule.
	IPTablesCTStateInvalidDroppedNFAcctCounter = "ct_state_invalid_dropped_pkts"

	ctStateInvalidDroppedDesc = metrics.NewDesc(
		"kubeproxy_iptables_ct_state_invalid_dropped_packets_total",
		"packets dropped by iptables to work around conntrack problems",
		nil, nil, metrics.ALPHA, "")

	// IPTablesRestoreFailuresTotal counts failed iptables-restore runs.
	IPTablesRestoreFailuresTotal = counterVec("sync_proxy_rules_iptables_restore_failures_total",
		"Cumulative proxy iptables restore failures", "ip_family")

	// IPTablesPartialRestoreFailuresTotal counts partial restores that failed
	// and forced a full one.
	IPTablesPartialRestoreFailuresTotal = counterVec("sync_proxy_rules_iptables_partial_restore_failures_total",
		"Cumulative proxy iptables partial restore failures", "ip_family")

	// IPTablesRulesTotal is the number of rules kube-proxy owns, per table.
	IPTablesRulesTotal = gaugeVec("sync_proxy_rules_iptables_total",
		"Total number of iptables rules owned by kube-proxy", "table", "ip_family")

	// IPTablesRulesLastSync is the number of rules written by the last sync.
	IPTablesRulesLastSync = gaugeVec("sync_proxy_rules_iptables_last",
		"Number of iptables rules written by kube-proxy in last sync", "table", "ip_family")

	// NFTablesSyncFailuresTotal counts failed nftables transactions.
	NFTablesSyncFailuresTotal = counterVec("sync_proxy_rules_nftables_sync_failures_total",
		"Cumulative proxy nftables sync failures", "ip_family")

	// NFTablesCleanupFailuresTotal counts failed stale-chain cleanups.
	NFTablesCleanupFailuresTotal = counterVec("sync_proxy_rules_nftables_cleanup_failures_total",
		"Cumulative proxy nftables cleanup failures", "ip_family")

	// ProxyHealthzTotal counts /healthz answers by HTTP status code.
	ProxyHealthzTotal = counterVec("proxy_healthz_total", "Cumulative proxy healthz HTTP status", "code")

	// ProxyLivezTotal counts /livez answers by HTTP status code.
	ProxyLivezTotal = counterVec("proxy_livez_total", "Cumulative proxy livez HTTP status", "code")

	// SyncProxyRulesLastQueuedTimestamp is when a sync was last requested; a
	// value far ahead of SyncProxyRulesLastTimestamp means syncing is stuck.
	SyncProxyRulesLastQueuedTimestamp = gaugeVec("sync_proxy_rules_last_queued_timestamp_seconds",
		"The last time a sync of proxy rules was queued", "ip_family")

	// SyncProxyRulesNoLocalEndpointsTotal is the number of services with a
	// Local traffic policy and no local endpoint.
	SyncProxyRulesNoLocalEndpointsTotal = gaugeVec("sync_proxy_rules_no_local_endpoints_total",
		"Number of services with a Local traffic policy and no endpoints", "traffic_policy", "ip_family")

	// WinKernelLBCreateFailure counts failed HNS load balancer creations.
	WinKernelLBCreateFailure = counterVec("sync_proxy_rules_winkernel_lb_create_failures_total",
		"Cumulative proxy winkernel lb create failures", "ip_family", "lb_type", "error")

	// WinKernelLBUpdateFailure counts failed HNS load balancer updates.
	WinKernelLBUpdateFailure = counterVec("sync_proxy_rules_winkernel_lb_update_failures_total",
		"Cumulative proxy winkernel lb update failures", "ip_family", "lb_type", "error")

	// WinKernelLBDeleteFailure counts failed HNS load balancer deletions.
	WinKernelLBDeleteFailure = counterVec("sync_proxy_rules_winkernel_lb_delete_failures_total",
		"Cumulative proxy winkernel lb delete failures", "ip_family", "lb_type", "error")

	// LocalhostNodePortAcceptedNFAcctCounter is the nfacct counter the
	// iptables proxier attaches to its localhost NodePort accept rule.
	LocalhostNodePortAcceptedNFAcctCounter = "localhost_nps_accepted_pkts"

	localhostNodePortsAcceptedDesc = metrics.NewDesc(
		"kubeproxy_iptables_localhost_nodeports_accepted_packets_total",
		"Number of packets accepted on nodeports of loopback interface",
		nil, nil, metrics.ALPHA, "")

	// LocalhostNodePortListeners is the number of localhost NodePort
	// userspace listeners currently bound (nftables mode).
	LocalhostNodePortListeners = gaugeVec("nftables_localhost_nodeport_listeners",
		"Number of active localhost NodePort userspace proxy listeners.", "ip_family")

	// LocalhostNodePortListenerCreationFailuresTotal counts failures to bind
	// a localhost NodePort userspace listener.
	LocalhostNodePortListenerCreationFailuresTotal = counterVec("nftables_localhost_nodeport_listener_creation_failures_total",
		"Number of localhost NodePort userspace proxy listener creation failures.", "ip_family")

	localhostNodePortRejectedDesc = metrics.NewDesc(
		"kubeproxy_nftables_localhost_nodeport_rejected_packets_total",
		"Number of packets rejected on localhost NodePorts. UDP and SCTP are always rejected; TCP is rejected when the localhost NodePort proxy is not running",
		[]string{"ip_family", "protocol"}, nil, metrics.ALPHA, "")

	// SyncProxyRulesDriftRepairsTotal counts differences between what
	// kube-proxy programmed and what the kernel held, found by the periodic
	// check and repaired, by what differed.
	SyncProxyRulesDriftRepairsTotal = counterVec("sync_proxy_rules_drift_repairs_total",
		"Cumulative number of rules, set elements or IPVS entries changed outside kube-proxy and repaired", "ip_family", "kind")

	// SyncProxyRulesDriftContested is how many objects another writer keeps
	// changing back, whose repair kube-proxy now backs off.
	SyncProxyRulesDriftContested = gaugeVec("sync_proxy_rules_drift_contested_objects",
		"Number of objects another writer keeps changing after kube-proxy repaired them", "ip_family")

	// ReconcileConntrackFlowsLatency observes one conntrack reconciliation.
	ReconcileConntrackFlowsLatency = histogramVec("conntrack_reconciler_sync_duration_seconds",
		"ReconcileConntrackFlowsLatency latency in seconds", syncBuckets(), "ip_family")

	// ReconcileConntrackFlowsDeletedEntriesTotal counts flows the conntrack
	// reconciler deleted.
	ReconcileConntrackFlowsDeletedEntriesTotal = counterVec("conntrack_reconciler_deleted_entries_total",
		"Cumulative conntrack flows deleted by conntrack reconciler", "ip_family")
)

// LocalhostNodePortRejectedProtocols are the NodePort protocols the localhost
// userspace proxy cannot serve, so their localhost traffic is always rejected.
var LocalhostNodePortRejectedProtocols = []v1.Protocol{v1.ProtocolUDP, v1.ProtocolSCTP}

// LocalhostNodePortRejectableProtocols are the protocols whose localhost
// NodePort traffic may be rejected and counted; TCP only while the userspace
// proxy is not running.
var LocalhostNodePortRejectableProtocols = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}

// LocalhostNodePortRejectedCounterName is the name of the nftables named
// counter, in the kube-proxy table, for rejected localhost NodePort packets
// of protocol.
func LocalhostNodePortRejectedCounterName(protocol v1.Protocol) string {
	return "localhost-nodeport-rejected-" + strings.ToLower(string(protocol))
}

// registry is the part of metrics.KubeRegistry registration needs, so tests
// can register into a private registry instead of the global one.
type registry interface {
	MustRegister(...metrics.Registerable)
	CustomMustRegister(...metrics.StableCollector)
}

type legacyRegistry struct{}

func (legacyRegistry) MustRegister(ms ...metrics.Registerable) { legacyregistry.MustRegister(ms...) }
func (legacyRegistry) CustomMustRegister(cs ...metrics.StableCollector) {
	legacyregistry.CustomMustRegister(cs...)
}

var registerOnce sync.Once

// RegisterMetrics registers, once per process, the metrics that proxy mode
// uses into the component-base legacy registry. Later calls are no-ops even
// with a different mode.
func RegisterMetrics(mode kubeproxyconfig.ProxyMode) {
	registerOnce.Do(func() {
		registerFor(legacyRegistry{}, mode,
			features.DefaultFeatureGate.Enabled(features.KubeProxyNFTablesLocalhostNodePorts),
			newNFAcctCollector)
	})
}

// registerFor is RegisterMetrics without the once and the globals.
func registerFor(r registry, mode kubeproxyconfig.ProxyMode, localhostNodePorts bool,
	nfacctCollector func(counter string, desc *metrics.Desc) metrics.StableCollector) {

	r.MustRegister(
		SyncProxyRulesLatency,
		SyncProxyRulesLastQueuedTimestamp,
		SyncProxyRulesLastTimestamp,
		EndpointChangesPending,
		EndpointChangesTotal,
		ServiceChangesPending,
		ServiceChangesTotal,
		ProxyHealthzTotal,
		ProxyLivezTotal,
		// Registered in every mode for name compatibility although the
		// Windows proxier never sets them.
		NetworkProgrammingLatency,
		SyncProxyRulesNoLocalEndpointsTotal,
		SyncProxyRulesDriftRepairsTotal,
		SyncProxyRulesDriftContested,
	)

	conntrack := []metrics.Registerable{ReconcileConntrackFlowsLatency, ReconcileConntrackFlowsDeletedEntriesTotal}

	switch mode {
	case kubeproxyconfig.ProxyModeIPTables:
		// nfacct may be missing from the kernel; the counters are then
		// simply not exported, as upstream does.
		for _, c := range []struct {
			name string
			desc *metrics.Desc
		}{
			{IPTablesCTStateInvalidDroppedNFAcctCounter, ctStateInvalidDroppedDesc},
			{LocalhostNodePortAcceptedNFAcctCounter, localhostNodePortsAcceptedDesc},
		} {
			if col := nfacctCollector(c.name, c.desc); col != nil {
				r.CustomMustRegister(col)
			}
		}
		r.MustRegister(
			SyncFullProxyRulesLatency,
			SyncPartialProxyRulesLatency,
			IPTablesRestoreFailuresTotal,
			IPTablesPartialRestoreFailuresTotal,
			IPTablesRulesTotal,
			IPTablesRulesLastSync,
		)
		r.MustRegister(conntrack...)

	case kubeproxyconfig.ProxyModeIPVS:
		r.MustRegister(IPTablesRestoreFailuresTotal)
		r.MustRegister(conntrack...)

	case kubeproxyconfig.ProxyModeNFTables:
		r.MustRegister(
			SyncFullProxyRulesLatency,
			SyncPartialProxyRulesLatency,
			NFTablesSyncFailuresTotal,
			NFTablesCleanupFailuresTotal,
		)
		if localhostNodePorts {
			r.MustRegister(LocalhostNodePortListeners, LocalhostNodePortListenerCreationFailuresTotal)
			r.CustomMustRegister(newNFTCounterCollector(localhostNodePortRejectedDesc, nftReaders))
		}
		r.MustRegister(conntrack...)

	case kubeproxyconfig.ProxyModeKernelspace:
		r.MustRegister(WinKernelLBCreateFailure, WinKernelLBUpdateFailure, WinKernelLBDeleteFailure)
	}
}

// SinceInSeconds returns the seconds elapsed since start.
func SinceInSeconds(start time.Time) float64 {
	return time.Since(start).Seconds()
}
