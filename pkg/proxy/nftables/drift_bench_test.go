//go:build linux

package nftables

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// selfCPU is this process's CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDriftCheck measures the periodic drift check on the real kernel
// (root only) against a table of n Services × 10 endpoints:
//   - unchanged: nothing wrote to nftables since the last check, so the check
//     is one generation request;
//   - other-table: another program changed another table before each check
//     (outside the timer), so the generation moved and the whole table is
//     dumped and compared, and found unchanged.
//
// cpu-ms/op is this process's CPU time per check (user and system, the
// kernel's dump work included), beside the wall time that load on this
// shared machine stretches.
func BenchmarkDriftCheck(b *testing.B) {
	tf := families[0]
	for _, n := range benchSizes {
		for _, otherTable := range []bool{false, true} {
			name := fmt.Sprintf("%d/unchanged", n)
			if otherTable {
				name = fmt.Sprintf("%d/other-table", n)
			}
			// Everything, nft included, runs on inNetns' thread: a sub-benchmark
			// would run on another goroutine, outside the private namespace.
			b.Run(name, func(b *testing.B) {
				inNetns(b, func() { benchDriftCheck(b, tf, n, otherTable) })
			})
		}
	}
}

func benchDriftCheck(b *testing.B, tf testFamily, n int, otherTable bool) {
	ctx := context.Background()
	s, _ := realSyncer(b, tf, nil)
	if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, benchServices(n, 10)...)}); err != nil {
		b.Fatal(err)
	}
	// The first check after a full sync learns every chain's rules;
	// reported apart.
	start, cpuStart := time.Now(), selfCPU()
	if d, err := s.drift(ctx); err != nil || len(d) > 0 {
		b.Fatalf("first check: drift %v, err %v", d, err)
	}
	firstWall, firstCPU := time.Since(start), selfCPU()-cpuStart
	b.ReportAllocs()
	var cpu time.Duration
	i := 0
	for b.Loop() {
		if otherTable {
			b.StopTimer()
			i++
			if out, err := exec.Command("nft", "add", "table", "ip", fmt.Sprintf("other-%d", i)).CombinedOutput(); err != nil {
				b.Fatalf("nft: %v: %s", err, out)
			}
			b.StartTimer()
		}
		cpu0 := selfCPU()
		if d, err := s.drift(ctx); err != nil || len(d) > 0 {
			b.Fatalf("drift %v, err %v", d, err)
		}
		cpu += selfCPU() - cpu0
	}
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	// After the loop: b.Loop's start drops metrics reported before it.
	b.ReportMetric(float64(firstWall)/float64(time.Millisecond), "first-check-ms")
	b.ReportMetric(float64(firstCPU)/float64(time.Millisecond), "first-check-cpu-ms")
}
