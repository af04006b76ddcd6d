//go:build linux

package nftables

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"sigs.k8s.io/knftables"
)

// BenchmarkDryRun is a dry run's work: a cold full sync and a second full
// sync that reads everything back, through DryRunInterface over the in-memory
// table ("memory") or over knftables' Fake ("fake", what dry runs used to
// do; quadratic, so only at 1k unless KUBE_PROXY_BENCH_LARGE=1). Compare
// ns/op across sizes: linear means 5k costs five times 1k.
func BenchmarkDryRun(b *testing.B) {
	tf := families[0]
	for _, n := range []int{1000, 5000} {
		svcs := benchServices(n, 10)
		for _, impl := range []string{"memory", "fake"} {
			b.Run(fmt.Sprintf("%s/%d", impl, n), func(b *testing.B) {
				if impl == "fake" && n > 1000 && os.Getenv("KUBE_PROXY_BENCH_LARGE") == "" {
					b.Skip("set KUBE_PROXY_BENCH_LARGE=1 to run the quadratic fake at this size")
				}
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					s, _ := newTestSyncer(b, tf, nil)
					if impl == "memory" {
						s.nft = NewDryRunInterface(familyOf(tf.family), io.Discard)
					} else {
						s.nft = &DryRunInterface{Interface: knftables.NewFake(familyOf(tf.family), kubeProxyTable), Out: io.Discard}
					}
					b.StartTimer()
					for range 2 {
						if _, err := s.sync(context.Background(), syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
							b.Fatal(err)
						}
					}
				}
				reportRSS(b)
			})
		}
	}
}
