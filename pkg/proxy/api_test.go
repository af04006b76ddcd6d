package proxy_test

import (
	"net"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/apis"
	"k8s.io/kube-proxy/pkg/proxy/config"
)

// These tests use the package the way an out-of-tree service proxy (Calico's
// eBPF data plane) does, from outside the package, so that an API change that
// would break such a consumer fails to compile here.

// myEndpoint is a third-party Endpoint implementation: the interface must
// keep exactly these nine methods.
type myEndpoint struct{ addr string }

func (e myEndpoint) String() string              { return e.addr }
func (e myEndpoint) IP() string                  { return "10.0.0.1" }
func (e myEndpoint) Port() int                   { return 80 }
func (e myEndpoint) IsLocal() bool               { return false }
func (e myEndpoint) IsReady() bool               { return true }
func (e myEndpoint) IsServing() bool             { return true }
func (e myEndpoint) IsTerminating() bool         { return false }
func (e myEndpoint) ZoneHints() sets.Set[string] { return nil }
func (e myEndpoint) NodeHints() sets.Set[string] { return nil }

var _ proxy.Endpoint = myEndpoint{}

// myServicePort embeds the interface, as Calico does.
type myServicePort struct {
	proxy.ServicePort
	note string
}

// handlerOnly implements the config handlers a consumer implements instead
// of Provider.
type handlerOnly struct{}

func (handlerOnly) OnServiceAdd(*v1.Service)                            {}
func (handlerOnly) OnServiceUpdate(_, _ *v1.Service)                    {}
func (handlerOnly) OnServiceDelete(*v1.Service)                         {}
func (handlerOnly) OnServiceSynced()                                    {}
func (handlerOnly) OnEndpointSliceAdd(*discovery.EndpointSlice)         {}
func (handlerOnly) OnEndpointSliceUpdate(_, _ *discovery.EndpointSlice) {}
func (handlerOnly) OnEndpointSliceDelete(*discovery.EndpointSlice)      {}
func (handlerOnly) OnEndpointSlicesSynced()                             {}

var (
	_ config.ServiceHandler       = handlerOnly{}
	_ config.EndpointSliceHandler = handlerOnly{}
	_ config.NodeHandler          = new(proxy.NodeManager)
)

func TestConsumerUsage(t *testing.T) {
	makeServiceInfo := func(p *v1.ServicePort, s *v1.Service, base *proxy.BaseServicePortInfo) proxy.ServicePort {
		return &myServicePort{ServicePort: base, note: s.Name}
	}
	sct := proxy.NewServiceChangeTracker(v1.IPv4Protocol, makeServiceInfo, nil)
	ect := proxy.NewEndpointsChangeTracker(v1.IPv4Protocol, "node", nil, nil)

	sct.Update(nil, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
		Spec:       v1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []v1.ServicePort{{Name: "p", Port: 80, Protocol: v1.ProtocolTCP}}},
	})
	ect.EndpointSliceUpdate(&discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "s-1", Labels: map[string]string{discovery.LabelServiceName: "s"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   []discovery.Endpoint{{Addresses: []string{"10.0.0.1"}, NodeName: ptr.To("node")}},
		Ports:       []discovery.EndpointPort{{Name: ptr.To("p"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}, false)

	svcMap := proxy.ServicePortMap{}
	epMap := proxy.EndpointsMap{}
	sres := svcMap.Update(sct)
	eres := epMap.Update(ect)
	key := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "s"}, Port: "p", Protocol: v1.ProtocolTCP}
	if sp, ok := svcMap[key].(*myServicePort); !ok || sp.note != "s" || !sp.ClusterIP().Equal(net.ParseIP("10.96.0.1")) {
		t.Errorf("service map entry = %#v", svcMap[key])
	}
	if !sres.UpdatedServices.Has(key.NamespacedName) || !eres.UpdatedServices.Has(key.NamespacedName) {
		t.Error("updated services not reported")
	}
	if got := epMap.LocalReadyEndpoints()[key.NamespacedName]; got != 1 {
		t.Errorf("LocalReadyEndpoints = %d, want 1", got)
	}
	if len(svcMap.HealthCheckNodePorts()) != 0 {
		t.Error("unexpected health check ports")
	}
	_, _, all, _ := proxy.CategorizeEndpoints([]proxy.Endpoint{myEndpoint{"10.0.0.1:80"}}, svcMap[key], "node", nil)
	if len(all) != 1 {
		t.Errorf("CategorizeEndpoints with a third-party endpoint = %v", all)
	}

	nm := new(proxy.NodeManager)
	nm.OnNodeChange(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node"}})
	var nodeSource interface{ Node() *v1.Node } = nm
	if nodeSource.Node() == nil {
		t.Error("zero-value NodeManager lost the node")
	}
	if apis.LabelServiceProxyName != "service.kubernetes.io/service-proxy-name" {
		t.Error("LabelServiceProxyName changed")
	}
	_ = proxy.ServiceEndpoint{Endpoint: "10.0.0.1:80", ServicePortName: key}
	var _ = proxy.NewEndpointSliceCache("node", nil)
}
