//go:build linux

package iptables

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	utiliptables "k8s.io/net-utils/iptables"
	sysctltest "k8s.io/net-utils/sysctl/testing"
)

// TestDumpRestoreInput writes the first full sync's restore input for the
// bench's cluster shape to $KUBE_PROXY_DUMP_RESTORE/restore-<n>.txt, for
// timing iptables-restore by hand. Skipped unless that variable is set.
func TestDumpRestoreInput(t *testing.T) {
	dir := os.Getenv("KUBE_PROXY_DUMP_RESTORE")
	if dir == "" {
		t.Skip("set KUBE_PROXY_DUMP_RESTORE to a directory to dump restore inputs")
	}
	sizes := []int{1000, 2000, 3000}
	if s := os.Getenv("KUBE_PROXY_DUMP_SIZES"); s != "" {
		sizes = nil
		for _, w := range filepath.SplitList(s) {
			n, _ := strconv.Atoi(w)
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		ipt := &discardIPTables{keep: true}
		benchProxierShape(t, ipt, n, 10)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("restore-%d.txt", n)), ipt.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// manyServicesShaped is the bench's cluster mix: every tenth Service a
// NodePort, every twentieth a LoadBalancer (with a NodePort and an ingress
// IP), and every fiftieth of those external ones externalTrafficPolicy=Local.
func manyServicesShaped(f fam, n, eps int) ([]*v1.Service, []*discovery.EndpointSlice) {
	svcs, slcs := manyServices(f, n, eps)
	for i, s := range svcs {
		switch {
		case i%20 == 5:
			s.Spec.Type = v1.ServiceTypeLoadBalancer
			s.Spec.Ports[0].NodePort = int32(30000 + i%2700)
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: fmt.Sprintf("203.0.%d.%d", 113+i/250%100, i%250+1)}}
		case i%10 == 0:
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = int32(30000 + i%2700)
		}
		if i%50 == 5 || i%50 == 10 {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = int32(32700 + i%60)
		}
	}
	return svcs, slcs
}

// benchProxierShape is benchProxierNFAcct (without nfacct) over the bench's
// cluster mix.
func benchProxierShape(b testing.TB, ipt utiliptables.Interface, n, eps int) (*Proxier, []*discovery.EndpointSlice) {
	b.Helper()
	f := families[0]
	ctx := klog.NewContext(b.Context(), klog.Background().V(10))
	cfg := newTestConfig(envConfig{})
	p, err := NewProxierWithOptions(ctx, cfg, v1.IPv4Protocol, ipt, sysctltest.NewFake(),
		proxyutil.NewDetectLocalByCIDR(f.clusterCIDR), testNodeName, nil, nil, nil, false,
		proxieropts.WithConntrack(conntrack.NewFake()), WithNFAcct(nil), proxieropts.WithServiceHealthServer(&recordingHealthServer{}),
		proxieropts.WithNetworkInterfacer(testNetwork(f)), WithoutMonitor())
	if err != nil {
		b.Fatal(err)
	}
	p.setLogger(klog.Background().V(10))
	svcs, slcs := manyServicesShaped(f, n, eps)
	for _, s := range svcs {
		p.OnServiceAdd(s)
	}
	for _, s := range slcs {
		p.OnEndpointSliceAdd(s)
	}
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	if p.NeedsFullSync() {
		b.Fatal("initial sync failed")
	}
	return p, slcs
}
