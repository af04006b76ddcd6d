package proxyrun

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// blockingBackend holds its first Sync until released and notes any Sync that starts
// while another is running.
type blockingBackend struct {
	entered, release chan struct{}
	mu               sync.Mutex
	running, overlap int
	families         map[localnode.Family]bool
}

func (b *blockingBackend) Sync(_ context.Context, s *localnode.State) error {
	b.mu.Lock()
	b.running++
	if b.running > 1 {
		b.overlap++
	}
	first := len(b.families) == 0
	b.families[s.Family] = true
	b.mu.Unlock()
	if first {
		close(b.entered)
		<-b.release
	}
	b.mu.Lock()
	b.running--
	b.mu.Unlock()
	return nil
}

func (b *blockingBackend) state() (overlap, families int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.overlap, len(b.families)
}

// TestBackendCallsSerialised runs two families, whose shells sync on goroutines of their
// own, into a backend that holds its first call: the other family's call must wait for
// it, as backend.FullState promises (and the Differ, whose Incremental's Sync is a
// per-family barrier, needs).
func TestBackendCallsSerialised(t *testing.T) {
	src := source.NewStatic()
	src.SetService(st.Service("ns", "web", []string{"10.0.0.10", "fd00::10"}))
	b := &blockingBackend{entered: make(chan struct{}), release: make(chan struct{}), families: map[localnode.Family]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, src, b, Options{NodeName: node, Families: []localnode.Family{localnode.IPv4, localnode.IPv6}})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	<-b.entered
	// The other family's first sync is due at once; give it time to (wrongly) start.
	time.Sleep(200 * time.Millisecond)
	if overlap, _ := b.state(); overlap != 0 {
		t.Errorf("%d backend calls started while another was running", overlap)
	}
	close(b.release)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, families := b.state(); families == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second family never synced after the first returned")
		}
	}
	if overlap, _ := b.state(); overlap != 0 {
		t.Errorf("%d backend calls overlapped", overlap)
	}
}
