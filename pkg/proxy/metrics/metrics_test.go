package metrics

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/util/nfacct"
)

type golden struct {
	name   string
	typ    dto.MetricType
	labels []string
}

// goldenMetrics is every metric kube-proxy v1.37 exposes.
var goldenMetrics = []golden{
	{"kubeproxy_sync_proxy_rules_duration_seconds", dto.MetricType_HISTOGRAM, []string{"ip_family"}},
	{"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", dto.MetricType_GAUGE, []string{"ip_family"}},
	{"kubeproxy_sync_proxy_rules_last_timestamp_seconds", dto.MetricType_GAUGE, []string{"ip_family"}},
	{"kubeproxy_sync_proxy_rules_endpoint_changes_pending", dto.MetricType_GAUGE, nil},
	{"kubeproxy_sync_proxy_rules_endpoint_changes_total", dto.MetricType_COUNTER, nil},
	{"kubeproxy_sync_proxy_rules_service_changes_pending", dto.MetricType_GAUGE, nil},
	{"kubeproxy_sync_proxy_rules_service_changes_total", dto.MetricType_COUNTER, nil},
	{"kubeproxy_proxy_healthz_total", dto.MetricType_COUNTER, []string{"code"}},
	{"kubeproxy_proxy_livez_total", dto.MetricType_COUNTER, []string{"code"}},
	{"kubeproxy_network_programming_duration_seconds", dto.MetricType_HISTOGRAM, []string{"ip_family"}},
	{"kubeproxy_sync_proxy_rules_no_local_endpoints_total", dto.MetricType_GAUGE, []string{"ip_family", "traffic_policy"}},
	{"kubeproxy_sync_full_proxy_rules_duration_seconds", dto.MetricType_HISTOGRAM, []string{"ip_family"}},
	{"kubeproxy_sync_partial_proxy_rules_duration_seconds", dto.MetricType_HISTOGRAM, []string{"ip_family"}},
	{"kubeproxy_sync_proxy_rules_iptables_restore_failures_total", dto.MetricType_COUNTER, []string{"ip_family"}},
	{"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", dto.MetricType_COUNTER, []string{"ip_family"}},
	{"kubeproxy_sync_proxy_rules_iptables_total", dto.MetricType_GAUGE, []string{"ip_family", "table"}},
	{"kubeproxy_sync_proxy_rules_iptables_last", dto.MetricType_GAUGE, []string{"ip_family", "table"}},
	{"kubeproxy_conntrack_reconciler_sync_duration_seconds", dto.MetricType_HISTOGRAM, []string{"ip_family"}},
	{"kubeproxy_conntrack_reconciler_deleted_entries_total", dto.MetricType_COUNTER, []string{"ip_family"}},
	{"kubeproxy_iptables_ct_state_invalid_dropped_packets_total", dto.MetricType_COUNTER, nil},
	{"kubeproxy_iptables_localhost_nodeports_accepted_packets_total", dto.MetricType_COUNTER, nil},
	{"kubeproxy_sync_proxy_rules_nftables_sync_failures_total", dto.MetricType_COUNTER, []string{"ip_family"}},
	{"kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total", dto.MetricType_COUNTER, []string{"ip_family"}},
	{"kubeproxy_nftables_localhost_nodeport_listeners", dto.MetricType_GAUGE, []string{"ip_family"}},
	{"kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total", dto.MetricType_COUNTER, []string{"ip_family"}},
	{"kubeproxy_nftables_localhost_nodeport_rejected_packets_total", dto.MetricType_COUNTER, []string{"ip_family", "protocol"}},
	{"kubeproxy_sync_proxy_rules_winkernel_lb_create_failures_total", dto.MetricType_COUNTER, []string{"error", "ip_family", "lb_type"}},
	{"kubeproxy_sync_proxy_rules_winkernel_lb_update_failures_total", dto.MetricType_COUNTER, []string{"error", "ip_family", "lb_type"}},
	{"kubeproxy_sync_proxy_rules_winkernel_lb_delete_failures_total", dto.MetricType_COUNTER, []string{"error", "ip_family", "lb_type"}},
}

// touchAll gives every vector a child so that it shows up when gathered.
func touchAll() {
	for _, h := range []*metrics.HistogramVec{SyncProxyRulesLatency, SyncFullProxyRulesLatency, SyncPartialProxyRulesLatency,
		NetworkProgrammingLatency, ReconcileConntrackFlowsLatency} {
		h.WithLabelValues("IPv4").Observe(0.01)
	}
	for _, g := range []*metrics.GaugeVec{SyncProxyRulesLastTimestamp, SyncProxyRulesLastQueuedTimestamp, LocalhostNodePortListeners} {
		g.WithLabelValues("IPv4").Set(1)
	}
	IPTablesRulesTotal.WithLabelValues("nat", "IPv4").Set(1)
	IPTablesRulesLastSync.WithLabelValues("nat", "IPv4").Set(1)
	SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues("internal", "IPv4").Set(0)
	for _, c := range []*metrics.CounterVec{IPTablesRestoreFailuresTotal, IPTablesPartialRestoreFailuresTotal,
		NFTablesSyncFailuresTotal, NFTablesCleanupFailuresTotal, LocalhostNodePortListenerCreationFailuresTotal,
		ReconcileConntrackFlowsDeletedEntriesTotal} {
		c.WithLabelValues("IPv4").Inc()
	}
	ProxyHealthzTotal.WithLabelValues("200").Inc()
	ProxyLivezTotal.WithLabelValues("200").Inc()
	for _, c := range []*metrics.CounterVec{WinKernelLBCreateFailure, WinKernelLBUpdateFailure, WinKernelLBDeleteFailure} {
		c.WithLabelValues("IPv4", "ClusterIP", "HNSError").Inc()
	}
	EndpointChangesPending.Set(0)
	ServiceChangesPending.Set(0)
	EndpointChangesTotal.Inc()
	ServiceChangesTotal.Inc()
}

type fakeNFAcct map[string]uint64

func (f fakeNFAcct) Get(name string) (*nfacct.Counter, error) {
	p, ok := f[name]
	if !ok {
		return nil, nfacct.ErrObjectNotFound
	}
	return &nfacct.Counter{Name: name, Packets: p}, nil
}

type fakeNFTReader struct {
	counts map[string]uint64
	err    error
}

func (f fakeNFTReader) ReadCounters(context.Context) (map[string]uint64, error) {
	return f.counts, f.err
}

func TestRegisterByMode(t *testing.T) {
	core := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		name               string
		mode               kubeproxyconfig.ProxyMode
		localhostNodePorts bool
		nfacctAvailable    bool
		want               []int // indexes into goldenMetrics
	}{
		{name: "iptables", mode: kubeproxyconfig.ProxyModeIPTables, nfacctAvailable: true,
			want: append(slices.Clone(core), 11, 12, 13, 14, 15, 16, 17, 18, 19, 20)},
		{name: "iptables without nfacct", mode: kubeproxyconfig.ProxyModeIPTables,
			want: append(slices.Clone(core), 11, 12, 13, 14, 15, 16, 17, 18)},
		{name: "ipvs", mode: kubeproxyconfig.ProxyModeIPVS, nfacctAvailable: true,
			want: append(slices.Clone(core), 13, 17, 18)},
		{name: "nftables", mode: kubeproxyconfig.ProxyModeNFTables,
			want: append(slices.Clone(core), 11, 12, 17, 18, 21, 22)},
		{name: "nftables with localhost nodeports", mode: kubeproxyconfig.ProxyModeNFTables, localhostNodePorts: true,
			want: append(slices.Clone(core), 11, 12, 17, 18, 21, 22, 23, 24, 25)},
		{name: "kernelspace", mode: kubeproxyconfig.ProxyModeKernelspace,
			want: append(slices.Clone(core), 26, 27, 28)},
		{name: "unknown mode registers the core", mode: "bogus", want: core},
	}
	SetNFTablesCounterReader(v1.IPv4Protocol, fakeNFTReader{counts: map[string]uint64{"localhost-nodeport-rejected-udp": 2}})
	t.Cleanup(func() { SetNFTablesCounterReader(v1.IPv4Protocol, nil) })

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := testutil.NewFakeKubeRegistry("1.37.0")
			nfacctFactory := func(counter string, desc *metrics.Desc) metrics.StableCollector {
				if !tc.nfacctAvailable {
					return nil
				}
				return &nfacctCollector{client: fakeNFAcct{counter: 5}, counter: counter, desc: desc}
			}
			registerFor(reg, tc.mode, tc.localhostNodePorts, nfacctFactory)
			// Lazy component-base metrics ignore writes until registered.
			touchAll()
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got []golden
			for _, mf := range families {
				var labels []string
				if len(mf.Metric) > 0 {
					for _, l := range mf.Metric[0].Label {
						labels = append(labels, l.GetName())
					}
				}
				if !strings.HasPrefix(mf.GetHelp(), "[ALPHA] ") {
					t.Errorf("%s: help %q is not marked ALPHA", mf.GetName(), mf.GetHelp())
				}
				got = append(got, golden{mf.GetName(), mf.GetType(), labels})
			}
			var want []golden
			for _, i := range tc.want {
				want = append(want, goldenMetrics[i])
			}
			byName := func(a, b golden) int { return strings.Compare(a.name, b.name) }
			slices.SortFunc(got, byName)
			slices.SortFunc(want, byName)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(golden{})); diff != "" {
				t.Errorf("registered metrics (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGoldenListComplete(t *testing.T) {
	if len(goldenMetrics) != 29 {
		t.Fatalf("golden list has %d entries, want 29", len(goldenMetrics))
	}
	// Registering every mode into one registry must cover exactly the list.
	names := map[string]bool{}
	for _, mode := range []kubeproxyconfig.ProxyMode{kubeproxyconfig.ProxyModeIPTables, kubeproxyconfig.ProxyModeIPVS,
		kubeproxyconfig.ProxyModeNFTables, kubeproxyconfig.ProxyModeKernelspace} {
		reg := testutil.NewFakeKubeRegistry("1.37.0")
		registerFor(reg, mode, true, func(counter string, desc *metrics.Desc) metrics.StableCollector {
			return &nfacctCollector{client: fakeNFAcct{counter: 1}, counter: counter, desc: desc}
		})
		touchAll()
		SetNFTablesCounterReader(v1.IPv6Protocol, fakeNFTReader{counts: map[string]uint64{"localhost-nodeport-rejected-tcp": 1}})
		fams, err := reg.Gather()
		SetNFTablesCounterReader(v1.IPv6Protocol, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range fams {
			names[mf.GetName()] = true
		}
	}
	for _, g := range goldenMetrics {
		if !names[g.name] {
			t.Errorf("%s is never registered", g.name)
		}
		delete(names, g.name)
	}
	for n := range names {
		t.Errorf("unexpected metric %s", n)
	}
}

func TestBuckets(t *testing.T) {
	exp := metrics.ExponentialBuckets(0.001, 2, 15)
	if len(exp) != 15 || exp[0] != 0.001 || exp[14] != 16.384 {
		t.Fatalf("unexpected exponential buckets %v", exp)
	}
	// component-base MergeBuckets starts with a 0 bucket; upstream exposes it
	// too, so it is part of the contract.
	npl := []float64{0, 0.25, 0.5}
	for i := 1; i <= 59; i++ {
		npl = append(npl, float64(i))
	}
	for i := 60; i <= 115; i += 5 {
		npl = append(npl, float64(i))
	}
	for i := 120; i <= 300; i += 30 {
		npl = append(npl, float64(i))
	}
	tests := []struct {
		name string
		h    *metrics.HistogramVec
		want []float64
	}{
		{"sync", SyncProxyRulesLatency, exp},
		{"full", SyncFullProxyRulesLatency, exp},
		{"partial", SyncPartialProxyRulesLatency, exp},
		{"conntrack", ReconcileConntrackFlowsLatency, exp},
		{"network programming", NetworkProgrammingLatency, npl},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.h.HistogramOpts.Buckets); diff != "" {
				t.Errorf("buckets (-want +got):\n%s", diff)
			}
		})
	}
	if len(npl) != 81 {
		t.Errorf("network programming buckets: %d, want 81", len(npl))
	}
}

func TestNFAcctCollector(t *testing.T) {
	tests := []struct {
		name   string
		client fakeNFAcct
		want   string
	}{
		{"present", fakeNFAcct{IPTablesCTStateInvalidDroppedNFAcctCounter: 42}, `
# HELP kubeproxy_iptables_ct_state_invalid_dropped_packets_total [ALPHA] packets dropped by iptables to work around conntrack problems
# TYPE kubeproxy_iptables_ct_state_invalid_dropped_packets_total counter
kubeproxy_iptables_ct_state_invalid_dropped_packets_total 42
`},
		{"absent counter exports nothing", fakeNFAcct{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &nfacctCollector{client: tc.client, counter: IPTablesCTStateInvalidDroppedNFAcctCounter, desc: ctStateInvalidDroppedDesc}
			if err := testutil.CustomCollectAndCompare(c, strings.NewReader(tc.want),
				"kubeproxy_iptables_ct_state_invalid_dropped_packets_total"); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestNFTCounterCollector(t *testing.T) {
	const header = `
# HELP kubeproxy_nftables_localhost_nodeport_rejected_packets_total [ALPHA] Number of packets rejected on localhost NodePorts. UDP and SCTP are always rejected; TCP is rejected when the localhost NodePort proxy is not running
# TYPE kubeproxy_nftables_localhost_nodeport_rejected_packets_total counter
`
	tests := []struct {
		name    string
		readers map[v1.IPFamily]NFTablesCounterReader
		want    string
	}{
		{"no readers", nil, ""},
		{
			name: "both families, unknown counters ignored",
			readers: map[v1.IPFamily]NFTablesCounterReader{
				v1.IPv4Protocol: fakeNFTReader{counts: map[string]uint64{
					LocalhostNodePortRejectedCounterName(v1.ProtocolUDP):  7,
					LocalhostNodePortRejectedCounterName(v1.ProtocolSCTP): 3,
					"something-else": 99,
				}},
				v1.IPv6Protocol: fakeNFTReader{counts: map[string]uint64{LocalhostNodePortRejectedCounterName(v1.ProtocolTCP): 1}},
			},
			want: header + `kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv4",protocol="SCTP"} 3
kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv4",protocol="UDP"} 7
kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv6",protocol="TCP"} 1
`,
		},
		{
			name: "failing family skipped",
			readers: map[v1.IPFamily]NFTablesCounterReader{
				v1.IPv4Protocol: fakeNFTReader{err: errors.New("netlink: permission denied")},
				v1.IPv6Protocol: fakeNFTReader{counts: map[string]uint64{LocalhostNodePortRejectedCounterName(v1.ProtocolUDP): 4}},
			},
			want: header + `kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family="IPv6",protocol="UDP"} 4
`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			readers := &readerSet{readers: map[v1.IPFamily]NFTablesCounterReader{}}
			for f, r := range tc.readers {
				readers.set(f, r)
			}
			c := newNFTCounterCollector(localhostNodePortRejectedDesc, readers)
			if err := testutil.CustomCollectAndCompare(c, strings.NewReader(tc.want),
				"kubeproxy_nftables_localhost_nodeport_rejected_packets_total"); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestLocalhostNodePortRejectedCounterName(t *testing.T) {
	tests := []struct {
		p    v1.Protocol
		want string
	}{
		{v1.ProtocolTCP, "localhost-nodeport-rejected-tcp"},
		{v1.ProtocolUDP, "localhost-nodeport-rejected-udp"},
		{v1.ProtocolSCTP, "localhost-nodeport-rejected-sctp"},
	}
	for _, tc := range tests {
		if got := LocalhostNodePortRejectedCounterName(tc.p); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.p, got, tc.want)
		}
	}
	if diff := cmp.Diff([]v1.Protocol{v1.ProtocolUDP, v1.ProtocolSCTP}, LocalhostNodePortRejectedProtocols); diff != "" {
		t.Errorf("rejected protocols: %s", diff)
	}
	if diff := cmp.Diff([]v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}, LocalhostNodePortRejectableProtocols); diff != "" {
		t.Errorf("rejectable protocols: %s", diff)
	}
}

func TestRegisterMetricsOnce(t *testing.T) {
	RegisterMetrics(kubeproxyconfig.ProxyModeIPVS)
	// A second call, even for another mode, must neither panic on duplicate
	// registration nor add that mode's metrics.
	RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	NFTablesSyncFailuresTotal.WithLabelValues("IPv4").Inc()
	IPTablesRestoreFailuresTotal.WithLabelValues("IPv4").Inc()
	fams, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var haveIPT, haveNFT bool
	for _, mf := range fams {
		switch mf.GetName() {
		case "kubeproxy_sync_proxy_rules_iptables_restore_failures_total":
			haveIPT = true
		case "kubeproxy_sync_proxy_rules_nftables_sync_failures_total":
			haveNFT = true
		}
	}
	if !haveIPT || haveNFT {
		t.Errorf("after ipvs then nftables: iptables restore metric %v (want true), nftables metric %v (want false)", haveIPT, haveNFT)
	}
}

func TestSinceInSeconds(t *testing.T) {
	got := SinceInSeconds(time.Now().Add(-2 * time.Second))
	if got < 2 || got > 60 {
		t.Errorf("SinceInSeconds = %v, want about 2", got)
	}
}
