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

	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/iptables"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
)

type sysctlIface = utilsysctl.Interface

type liberalSysctl struct{}

func (liberalSysctl) GetSysctl(string) (int, error) { return 1, nil }
func (liberalSysctl) SetSysctl(string, int) error   { return nil }

// TestRandDump writes upstream's full-sync restore input for every
// $DIR/<family>-<n>.json cluster to $DIR/<family>-<n>.upstream.txt, and for
// clusters 0-3 also with configuration variants to
// $DIR/<family>-<n>.<variant>.upstream.txt.
func TestRandDump(t *testing.T) {
	dir := os.Getenv("DIR")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, file := range files {
		variants := []string{""}
		if n := strings.TrimSuffix(filepath.Base(file), ".json"); strings.HasSuffix(n, "-0") || strings.HasSuffix(n, "-1") || strings.HasSuffix(n, "-2") || strings.HasSuffix(n, "-3") {
			variants = append(variants, "masqall", "nolocalhost", "nodetect", "liberal")
		}
		for _, variant := range variants {
			dumpOne(t, file, variant)
		}
	}
}

func dumpOne(t *testing.T, file, variant string) {
	{
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
		var sysctl interface {
			GetSysctl(string) (int, error)
			SetSysctl(string, int) error
		} = fakeSysctl{}
		detector := proxyutil.NewDetectLocalByCIDR(cidr)
		switch variant {
		case "masqall":
			cfg.Linux.MasqueradeAll = true
		case "nolocalhost":
			cfg.IPTables.LocalhostNodePorts = ptr.To(false)
		case "nodetect":
			detector = proxyutil.NewNoOpLocalDetector()
		case "liberal":
			sysctl = liberalSysctl{}
		}
		p, err := iptables.NewProxier(ctx, cfg, family, ipt, sysctl.(sysctlIface), detector, "node1", net.ParseIP(node), nil, nil, false)
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
		out := strings.TrimSuffix(file, ".json")
		if variant != "" {
			out += "." + variant
		}
		if err := os.WriteFile(out+".upstream.txt", d.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
