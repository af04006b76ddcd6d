package proxyrun_test

import (
	"context"
	"fmt"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// printer is a FullState backend printing where cluster-IP traffic goes.
type printer struct{}

func (printer) Sync(_ context.Context, state *localnode.State) error {
	for _, svc := range state.Services {
		fmt.Println("program", svc.Name, svc.ClusterIP, "->", svc.InternalEndpoints())
	}
	return nil
}

// testWithoutCluster is the snippet of docs/writing-a-proxy.md, "Testing without a
// cluster"; test/consumer's docs test checks that the page shows exactly this code.
func testWithoutCluster(ctx context.Context, myBackend backend.FullState) error {
	src := source.NewStatic()
	src.SetNode(st.Node("node-a", "zone-1"))
	src.SetService(st.Service("ns", "web", []string{"10.96.0.10"}, st.InternalLocal()))
	src.SetEndpointSlice(st.EndpointSlice("ns", "web", "web-1", "http", 8080,
		st.Endpoint("10.1.0.1", "node-a"), st.Endpoint("10.1.0.2", "node-b")))
	p, err := proxyrun.New(myBackend, proxyrun.Options{NodeName: "node-a"})
	if err != nil {
		return err
	}
	go src.Run(ctx, p)
	// Run delivers the objects on its own goroutine: wait for them before syncing.
	if err := p.WaitForInitial(ctx); err != nil {
		return err
	}
	changed, err := p.SyncReport(ctx) // true: the backend got its first State
	fmt.Println("first sync changed:", changed, err)

	// Static delivers each change before returning, so the next sync sees it.
	src.SetEndpointSlice(st.EndpointSlice("ns", "web", "web-1", "http", 8080,
		st.Endpoint("10.1.0.3", "node-a"), st.Endpoint("10.1.0.2", "node-b")))
	changed, err = p.SyncReport(ctx)
	fmt.Println("second sync changed:", changed, err)
	changed, err = p.SyncReport(ctx) // nothing new: the backend is not called
	fmt.Println("third sync changed:", changed, err)
	return nil
}

// Example_testingWithoutACluster drives a backend through the brain with the static
// source, synchronously: no cluster, no sleeps.
func Example_testingWithoutACluster() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := testWithoutCluster(ctx, printer{}); err != nil {
		fmt.Println(err)
	}
	// Output:
	// program ns/web:http/TCP 10.96.0.10 -> [10.1.0.1:8080]
	// first sync changed: true <nil>
	// program ns/web:http/TCP 10.96.0.10 -> [10.1.0.3:8080]
	// second sync changed: true <nil>
	// third sync changed: false <nil>
}
