//go:build linux

package ebpf

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// The sync benchmarks run the backend over in-memory maps (the Go cost alone) and over
// the kernel's maps (loaded, not attached: attaching changes nothing for map writes), at
// 1k and 50k ClusterIP services of two endpoints each. The targets: one endpoint
// change at 50k services under 1 ms of backend time, a full sync of 50k under 2 s.

// nullMap discards writes: the Go side's own cost.
type nullMap struct{}

func (nullMap) Put(key, value any) error { return nil }
func (nullMap) Delete(key any) error     { return nil }

func benchMaps(b *testing.B, kernel bool) *Maps {
	if !kernel {
		return &Maps{Frontends: nullMap{}, Sets: nullMap{}, Backends: nullMap{}}
	}
	if os.Geteuid() != 0 {
		b.Skip("needs root to load BPF maps")
	}
	bpffs := b.TempDir()
	if err := unix.Mount("bpf", bpffs, "bpf", 0, ""); err != nil {
		b.Skipf("cannot mount a bpf filesystem: %v", err)
	}
	b.Cleanup(func() { _ = unix.Unmount(bpffs, unix.MNT_DETACH) })
	if err := CheckKernel(Config{PinPath: filepath.Join(bpffs, "x")}); err != nil {
		b.Skip(err)
	}
	var objs socketlbObjects
	if err := loadSocketlbObjects(&objs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: bpffs}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { objs.Close() })
	m := &objs.socketlbMaps
	return &Maps{Frontends: tolerantMap{m.Frontends}, Sets: tolerantMap{m.Sets}, Backends: tolerantMap{m.Backends}}
}

func benchState(n int) *localnode.State {
	st := &localnode.State{Family: localnode.IPv4, Services: make([]localnode.Service, n)}
	for i := range st.Services {
		vip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		if i >= 1<<16 {
			panic("too many services for the benchmark's address plan")
		}
		st.Services[i] = localnode.Service{ServicePort: localnode.ServicePort{
			Name:      localnode.PortName{Namespace: "ns", Name: fmt.Sprintf("svc-%05d", i), Port: "p", Protocol: localnode.TCP},
			ClusterIP: vip, Port: 80,
		}, HasAnyEndpoints: true}
		for j := 0; j < 2; j++ {
			st.Services[i].Endpoints = append(st.Services[i].Endpoints, localnode.Endpoint{
				IP: netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), Port: uint16(8080 + j),
				Ready: true, Serving: true, ForCluster: true, ForLocal: true})
		}
	}
	st.Normalize()
	return st
}

// processCPU is the CPU time this process has used (user and system, every thread):
// on a loaded machine wall time also measures the run queue, so the benchmarks report
// it beside ns/op.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkSync(b *testing.B) {
	ctx := context.Background()
	for _, kernel := range []bool{false, true} {
		for _, n := range []int{1000, 50000} {
			where := map[bool]string{false: "go", true: "kernel"}[kernel]
			b.Run(fmt.Sprintf("full/%s/%d", where, n), func(b *testing.B) {
				maps := benchMaps(b, kernel)
				st := benchState(n)
				empty := &localnode.State{Family: localnode.IPv4}
				var cpu time.Duration
				for b.Loop() {
					d := backend.NewDiffer(NewBackend(maps, nil, nil))
					c0 := processCPU()
					if err := d.Sync(ctx, st); err != nil {
						b.Fatal(err)
					}
					cpu += processCPU() - c0
					b.StopTimer()
					if err := d.Sync(ctx, empty); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
			// Backend time of one endpoint change: the calls the Differ would make
			// and the barrier, without the Differ's walk of the State.
			b.Run(fmt.Sprintf("one-endpoint/%s/%d", where, n), func(b *testing.B) {
				maps := benchMaps(b, kernel)
				st := benchState(n)
				be := NewBackend(maps, nil, nil)
				if err := backend.NewDiffer(be).Sync(ctx, st); err != nil {
					b.Fatal(err)
				}
				svc := &st.Services[n/2]
				old := svc.Endpoints[1]
				alt := old
				alt.Port = 9090
				i := 0
				c0 := processCPU()
				for b.Loop() {
					from, to := old, alt
					if i%2 == 1 {
						from, to = alt, old
					}
					i++
					be.DeleteEndpoint(localnode.IPv4, svc.Name, from.AddrPort())
					be.SetEndpoint(localnode.IPv4, svc.Name, to)
					if err := be.SyncFamily(ctx, localnode.IPv4); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((processCPU()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
