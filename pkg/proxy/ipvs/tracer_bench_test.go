//go:build linux

package ipvs

import (
	"net/netip"
	"testing"

	ptrace "k8s.io/kube-proxy/pkg/proxy/trace"
)

// BenchmarkTrace is issue 20's figure for ipvs mode: building the tracer
// from the fakes' state of 10k services of 10 endpoints (iptables save, ip
// sets, IPVS table, addresses) and tracing one packet once it is built.
func BenchmarkTrace(b *testing.B) {
	_, env, _, _ := benchProxier(b, 10000)
	pk := ptrace.Packet{Src: netip.MustParseAddr("10.0.9.9"), Dst: netip.MustParseAddr("172.30.20.1"), Protocol: "tcp", Port: 80,
		From: ptrace.FromPod, InInterface: testBridge}
	b.Run("build/10000", func(b *testing.B) {
		for range b.N {
			newTracer(b, env)
		}
	})
	b.Run("trace/10000", func(b *testing.B) {
		tr := newTracer(b, env)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			r, err := tr.ipvs.Trace(pk, tr.node)
			if err != nil || len(r.Outcomes) != 10 {
				b.Fatalf("%v, %d outcomes", err, len(r.Outcomes))
			}
		}
	})
}
