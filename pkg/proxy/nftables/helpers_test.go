//go:build linux

package nftables

import (
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/knftables"

	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	proxyutiltest "k8s.io/kube-proxy/pkg/proxy/util/testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// countingNFT counts kernel round trips so tests can prove that partial and
// no-op syncs do not list the table.
type countingNFT struct {
	*knftables.Fake
	runs, lists atomic.Int32
	// elementLists counts ListElements calls alone.
	elementLists atomic.Int32
	failNext     atomic.Bool
}

func (c *countingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	c.runs.Add(1)
	if c.failNext.CompareAndSwap(true, false) {
		return errInjected
	}
	return c.Fake.Run(ctx, tx)
}

func (c *countingNFT) List(ctx context.Context, t string) ([]string, error) {
	c.lists.Add(1)
	return c.Fake.List(ctx, t)
}

func (c *countingNFT) ListElements(ctx context.Context, t, name string) ([]*knftables.Element, error) {
	c.lists.Add(1)
	c.elementLists.Add(1)
	return c.Fake.ListElements(ctx, t, name)
}

func (c *countingNFT) ListRules(ctx context.Context, chain string) ([]*knftables.Rule, error) {
	c.lists.Add(1)
	return c.Fake.ListRules(ctx, chain)
}

type injectedError struct{}

func (injectedError) Error() string { return "injected failure" }

var errInjected = injectedError{}

// testFamily holds per-family addresses used across tests.
type testFamily struct {
	family   v1.IPFamily
	nodeIP   string
	podCIDR  string
	svcCIDR  string
	external string // an off-cluster client
	ip       func(suffix string) string
}

var families = []testFamily{
	{
		family: v1.IPv4Protocol, nodeIP: "192.168.0.2", podCIDR: "10.0.0.0/8", svcCIDR: "172.30.0.0/16", external: "203.0.113.9",
		ip: func(s string) string { return s },
	},
	{
		family: v1.IPv6Protocol, nodeIP: "fd00:c::2", podCIDR: "fd00:10::/64", svcCIDR: "fd00:172:30::/96", external: "2001:db8::9",
		ip: v4toV6,
	},
}

// v4toV6 maps the IPv4 test addresses into this file's IPv6 test ranges so
// that one table of cases covers both families.
func v4toV6(s string) string {
	ip, cidr, err := net.ParseCIDR(s)
	suffix := ""
	if err == nil {
		ones, _ := cidr.Mask.Size()
		suffix = "/" + itoa(96+ones)
		s = ip.String()
	}
	ip4 := net.ParseIP(s).To4()
	if ip4 == nil {
		return s
	}
	var prefix string
	switch {
	case ip4[0] == 10:
		prefix = "fd00:10::"
	case ip4[0] == 172:
		prefix = "fd00:172:30::"
	case ip4[0] == 192 && ip4[1] == 168:
		prefix = "fd00:c::"
	case ip4[0] == 203:
		prefix = "2001:db8::"
	default:
		prefix = "fd00:99::"
	}
	out := net.ParseIP(prefix).To16()
	out[12], out[13], out[14], out[15] = ip4[0], ip4[1], ip4[2], ip4[3]
	if suffix != "" {
		if ip4[0] == 10 {
			return "fd00:10::/64"
		}
		return out.String() + suffix
	}
	return out.String()
}

func itoa(i int) string { return strconv.Itoa(i) }

func newTestSyncer(t testing.TB, tf testFamily, mutate func(*syncerConfig)) (*syncer, *countingNFT) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	_ = ctx
	fake := &countingNFT{Fake: knftables.NewFake(familyOf(tf.family), kubeProxyTable)}
	nw := proxyutiltest.NewFakeNetwork()
	ifc := &net.Interface{Name: "eth0"}
	nw.AddInterfaceAddr(ifc, []net.Addr{&net.IPNet{IP: net.ParseIP(tf.nodeIP), Mask: net.CIDRMask(24, 8*len(net.ParseIP(tf.nodeIP)))}})
	bits := 32
	if tf.family == v1.IPv6Protocol {
		bits = 128
	}
	cfg := syncerConfig{
		family:            tf.family,
		masqueradeBit:     14,
		localDetector:     proxyutil.NewDetectLocalByCIDR(tf.podCIDR),
		nodeIP:            net.ParseIP(tf.nodeIP),
		nodePortAddresses: proxyutil.NewNodePortAddresses(tf.family, []string{tf.nodeIP + "/" + itoa(bits)}),
		networkInterfacer: nw,
		maxOps:            DefaultMaxOpsPerTransaction,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	logger, _ := ktesting.NewTestContext(t)
	s := newSyncer(fake, cfg, logger)
	s.serviceCIDRs = tf.svcCIDR
	return s, fake
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs from golden file (-want +got, run with -update to accept):\n%s", name, diff)
	}
}

func newNPA(f v1.IPFamily, cidrs ...string) *proxyutil.NodePortAddresses {
	return proxyutil.NewNodePortAddresses(f, cidrs)
}
