//go:build linux

package app

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// The target: tracing one packet through a 10k-Service ruleset
// read from the kernel in at most 2 s including the read, and at most 10 ms
// per trace once parsed. The rules are what kube-proxy computes (as
// --dry-run) for 10,000 ClusterIP Services with 2 endpoints each.
//
//	go test -run XXX -bench BenchmarkTrace -benchtime 5x ./cmd/kube-proxy/app
//
// BenchmarkTraceLive (root only) loads them into a private network
// namespace and measures the whole `kube-proxy trace --netns` path: the
// read (iptables-save, nft -j list ruleset), the parse and one trace.

const benchServices = 10000

var (
	benchOnce  sync.Once
	benchRules map[string]string // mode -> IPv4 dry-run section
	benchErr   error
)

// writeBenchManifests writes n Services (10.96.x.y:80) with two endpoints
// each, one on each of examples/cluster's nodes.
func writeBenchManifests(dir string, n int) error {
	var b strings.Builder
	for i := range n {
		ip := fmt.Sprintf("10.96.%d.%d", 1+i/250, 1+i%250)
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Service
metadata: {name: s%d, namespace: bench}
spec:
  type: ClusterIP
  clusterIP: %s
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: s%d-1, namespace: bench, labels: {kubernetes.io/service-name: s%d}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [198.19.%d.%d], nodeName: node-1, conditions: {ready: true}}
- {addresses: [198.19.%d.%d], nodeName: node-2, conditions: {ready: true}}
`, i, ip, i, i, 100+i/250, 1+i%250, 150+i/250, 1+i%250)
	}
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	for _, f := range []string{"nodes.yaml", "servicecidr.yaml"} {
		data, err := os.ReadFile(filepath.Join(clusterManifests, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func benchRuleset(b *testing.B, mode string) string {
	b.Helper()
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kp-trace-bench-")
		if err != nil {
			benchErr = err
			return
		}
		defer func() { _ = os.RemoveAll(dir) }()
		if benchErr = writeBenchManifests(dir, benchServices); benchErr != nil {
			return
		}
		benchRules = map[string]string{}
		for _, m := range []string{"iptables", "nftables"} {
			o := NewOptions()
			fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
			o.AddFlags(fs)
			if benchErr = fs.Parse([]string{"--manifests=" + dir, "--hostname-override=node-1", "--proxy-mode=" + m}); benchErr != nil {
				return
			}
			if benchErr = o.Complete(fs); benchErr != nil {
				return
			}
			ctx := klog.NewContext(context.Background(), klog.Background().V(10))
			text, _, err := computeRules(ctx, o)
			if err != nil {
				benchErr = err
				return
			}
			benchRules[m] = text
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchRules[mode]
}

func benchParse(b *testing.B, mode, text string) trace.Tracer {
	tr, err := parseComputed(text, mode, v1.IPv4Protocol)
	if err != nil {
		b.Fatal(err)
	}
	return tr
}

var benchPacket = trace.Packet{Src: netip.MustParseAddr("198.19.1.5"), Dst: netip.MustParseAddr("10.96.40.10"), Protocol: "tcp", Port: 80, From: trace.FromPod, InInterface: "veth1"}

func checkBenchResult(b *testing.B, r *trace.Result) {
	if len(r.Outcomes) != 2 || r.Outcomes[0].DNAT == "" {
		b.Fatalf("unexpected trace: %+v", r.Outcomes)
	}
}

// BenchmarkTraceParse: reading a 10k-Service ruleset (one op = one parse).
func BenchmarkTraceParse(b *testing.B) {
	for _, mode := range []string{"iptables", "nftables"} {
		b.Run(mode, func(b *testing.B) {
			text := benchRuleset(b, mode)
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				benchParse(b, mode, text)
			}
		})
	}
}

// BenchmarkTraceOne: one packet through the parsed 10k-Service ruleset.
func BenchmarkTraceOne(b *testing.B) {
	for _, mode := range []string{"iptables", "nftables"} {
		b.Run(mode, func(b *testing.B) {
			tr := benchParse(b, mode, benchRuleset(b, mode))
			node := &trace.Node{LocalAddrs: []netip.Addr{netip.MustParseAddr("198.18.0.10")}}
			for b.Loop() {
				r, err := tr.Trace(benchPacket, node)
				if err != nil {
					b.Fatal(err)
				}
				checkBenchResult(b, r)
			}
		})
	}
}

// BenchmarkTraceLive: the kernel read, parse and one trace (one op), from
// a private network namespace holding the 10k-Service ruleset.
func BenchmarkTraceLive(b *testing.B) {
	for _, mode := range []string{"iptables", "nftables"} {
		b.Run(mode, func(b *testing.B) {
			text := benchRuleset(b, mode)
			if os.Geteuid() != 0 {
				b.Skip("needs root to create a network namespace")
			}
			tool := map[string]string{"iptables": "iptables-restore", "nftables": "nft"}[mode]
			if _, err := exec.LookPath(tool); err != nil {
				b.Skipf("needs %s", tool)
			}
			ns := fmt.Sprintf("kptrace-bench-%d", os.Getpid())
			if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
				b.Skipf("cannot create a network namespace: %v: %s", err, out)
			}
			b.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
			section := dryRunIPv4(text)
			if mode == "nftables" {
				nsRunInput(b, ns, section, "nft", "-f", "-")
			} else {
				loadIPTablesDryRun(b, ns, section)
			}
			node := &trace.Node{LocalAddrs: []netip.Addr{netip.MustParseAddr("198.18.0.10")}}
			ctx := context.Background()
			var read, parse, one time.Duration
			for b.Loop() {
				start := time.Now()
				data, _, err := readLiveText(ctx, nil, ns, mode, v1.IPv4Protocol)
				if err != nil {
					b.Fatal(err)
				}
				read += time.Since(start)
				start = time.Now()
				tr, err := parseLive(data, mode)
				if err != nil {
					b.Fatal(err)
				}
				parse += time.Since(start)
				start = time.Now()
				r, err := tr.Trace(benchPacket, node)
				if err != nil {
					b.Fatal(err)
				}
				one += time.Since(start)
				checkBenchResult(b, r)
			}
			n := float64(b.N)
			b.ReportMetric(float64(read.Milliseconds())/n, "read-ms/op")
			b.ReportMetric(float64(parse.Milliseconds())/n, "parse-ms/op")
			b.ReportMetric(float64(one.Microseconds())/n/1000, "trace-ms/op")
		})
	}
}

func dryRunIPv4(text string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "# kube-proxy --dry-run: ") {
			in = strings.HasPrefix(line, "# kube-proxy --dry-run: IPv4,")
			continue
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
