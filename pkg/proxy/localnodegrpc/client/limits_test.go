package client_test

import (
	"fmt"
	"net/netip"
	"testing"

	"google.golang.org/protobuf/proto"
	discovery "k8s.io/api/discovery/v1"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// TestDefaultLimitsFitLargeCluster measures the full state of a cluster at Kubernetes'
// documented scalability limits (10,000 Services, 150,000 endpoints in 15,000
// EndpointSlices) as a server sends it, global view and node-local services together,
// and checks the default limits leave room for it several times over, so they only
// ever stop a server that misbehaves.
func TestDefaultLimitsFitLargeCluster(t *testing.T) {
	const services, slicesPerService, endpointsPerSlice = 10000, 3, 5
	var objects int
	var bytes int64
	biggest := 0
	add := func(op *localnodev1.Op) {
		n := proto.Size(op)
		objects, bytes, biggest = objects+1, bytes+int64(n), max(biggest, n)
	}
	ep := 0
	for i := range services {
		name := fmt.Sprintf("service-%05d", i)
		add(&localnodev1.Op{Op: &localnodev1.Op_SetGlobalService{SetGlobalService: localnodev1.GlobalServiceFromAPI(
			st.Service("namespace-"+fmt.Sprint(i%100), name, []string{fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)}))}})
		local := localnode.Service{ServicePort: localnode.ServicePort{
			Name:      localnode.PortName{Namespace: "namespace-" + fmt.Sprint(i%100), Name: name, Port: "http", Protocol: localnode.TCP},
			ClusterIP: netip.AddrFrom4([4]byte{10, 96, byte(i / 250), byte(i%250 + 1)}), Port: 80,
		}, HasAnyEndpoints: true}
		for j := range slicesPerService {
			var eps []discovery.Endpoint
			for range endpointsPerSlice {
				ep++
				ip := fmt.Sprintf("10.%d.%d.%d", 128+ep/65536, ep/256%256, ep%256)
				nodeName := fmt.Sprintf("node-%04d", ep%5000)
				eps = append(eps, st.Endpoint(ip, nodeName, st.Zone(fmt.Sprintf("zone-%d", ep%3), true)))
				local.Endpoints = append(local.Endpoints, localnode.Endpoint{IP: netip.MustParseAddr(ip), Port: 8080,
					Ready: true, Serving: true, NodeName: nodeName, Zone: fmt.Sprintf("zone-%d", ep%3), ForCluster: true})
			}
			add(&localnodev1.Op{Op: &localnodev1.Op_SetEndpointSlice{SetEndpointSlice: localnodev1.EndpointSliceFromAPI(
				st.EndpointSlice("namespace-"+fmt.Sprint(i%100), name, fmt.Sprintf("%s-%d", name, j), "http", 8080, eps...))}})
		}
		add(&localnodev1.Op{Op: &localnodev1.Op_SetService{SetService: localnodev1.ServiceFromLocal(localnode.IPv4, &local)}})
	}
	t.Logf("full state of %d services and %d endpoints: %d objects, %d bytes (%.1f MiB), largest object %d bytes",
		services, ep, objects, bytes, float64(bytes)/(1<<20), biggest)
	const headroom = 8
	if objects*headroom > client.DefaultMaxPendingObjects {
		t.Errorf("DefaultMaxPendingObjects %d leaves less than %dx room for %d objects", client.DefaultMaxPendingObjects, headroom, objects)
	}
	if bytes*headroom > client.DefaultMaxPendingBytes {
		t.Errorf("DefaultMaxPendingBytes %d leaves less than %dx room for %d bytes", client.DefaultMaxPendingBytes, headroom, bytes)
	}
}
