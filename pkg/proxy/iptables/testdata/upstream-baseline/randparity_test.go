package ub

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/iptables"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
)

// TestRandDump writes upstream's full-sync restore input for every
// $DIR/<family>-<n>.json cluster to $DIR/<family>-<n>.upstream.txt.
func TestRandDump(t *testing.T) {
	dir := os.Getenv("DIR")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, file := range files {
		family, cidr, node := v1.IPv4Protocol, "10.0.0.0/8", "192.168.0.2"
		if strings.HasPrefix(filepath.Base(file), "ipv6") {
			family, cidr, node = v1.IPv6Protocol, "fd00:10::/64", "fd00:192::2"
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var in struct {
			Services []*v1.Service
			Slices   []*discovery.EndpointSlice
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			t.Fatal(err)
		}
		cfg := &kubeproxyconfig.KubeProxyConfiguration{}
		cfg.IPTables.MasqueradeBit = ptr.To[int32](14)
		cfg.IPTables.LocalhostNodePorts = ptr.To(true)
		cfg.SyncPeriod = metav1.Duration{Duration: 30 * time.Second}
		cfg.MinSyncPeriod = metav1.Duration{Duration: time.Second}
		ctx := klog.NewContext(context.Background(), klog.Background().V(10))
		var d *discard
		var ipt iptablesIface
		if family == v1.IPv6Protocol {
			x := &ipt6{}
			d, ipt = &x.discard, x
		} else {
			d = &discard{}
			ipt = d
		}
		p, err := iptables.NewProxier(ctx, cfg, family, ipt, fakeSysctl{}, proxyutil.NewDetectLocalByCIDR(cidr), "node1", net.ParseIP(node), nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range in.Services {
			p.OnServiceAdd(s)
		}
		for _, s := range in.Slices {
			p.OnEndpointSliceAdd(s)
		}
		p.OnEndpointSlicesSynced()
		p.OnServiceSynced()
		if err := os.WriteFile(strings.TrimSuffix(file, ".json")+".upstream.txt", d.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
