package testing

import (
	"errors"
	"testing"

	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
)

func lb(vip string, port uint16, eps ...string) *hcnapi.LoadBalancer {
	l := &hcnapi.LoadBalancer{Endpoints: eps, PortMappings: []hcnapi.PortMapping{{Protocol: 6, InternalPort: 8080, ExternalPort: port}}}
	if vip != "" {
		l.FrontendVIPs = []string{vip}
	}
	return l
}

func TestFakeChecksWhatHNSChecks(t *testing.T) {
	f := NewFake(AllFeatures())
	n := f.AddNetwork("cbr0", hcnapi.NetworkTypeL2Bridge)
	ep, err := f.CreateEndpoint(n.ID, &hcnapi.Endpoint{IPs: []string{"10.0.0.1"}, Remote: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateEndpoint(n.ID, &hcnapi.Endpoint{IPs: []string{"10.0.0.1"}}); err == nil {
		t.Errorf("duplicate address accepted")
	}
	if _, err := f.CreateEndpoint("nope", &hcnapi.Endpoint{IPs: []string{"10.0.0.2"}}); !hcnapi.IsNetworkNotFound(err) {
		t.Errorf("unknown network: %v", err)
	}
	a, err := f.CreateLoadBalancer(lb("10.96.0.1", 80, ep.ID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateLoadBalancer(lb("10.96.0.1", 80, ep.ID)); !hcnapi.IsPortAlreadyExists(err) {
		t.Errorf("second load balancer on a frontend: %v", err)
	}
	if _, err := f.CreateLoadBalancer(lb("10.96.0.2", 80, "ep-none")); !hcnapi.IsNotFound(err) {
		t.Errorf("unknown endpoint: %v", err)
	}
	// An update may keep its own frontend.
	if _, err := f.UpdateLoadBalancer(a.ID, lb("10.96.0.1", 80)); err != nil {
		t.Errorf("update: %v", err)
	}
	if err := f.DeleteLoadBalancer(a.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.DeleteLoadBalancer(a.ID); !hcnapi.IsNotFound(err) {
		t.Errorf("deleting twice: %v", err)
	}
	// The frontend is free again.
	if _, err := f.CreateLoadBalancer(lb("10.96.0.1", 80)); err != nil {
		t.Errorf("frontend not freed: %v", err)
	}
	f.SetFeatures(hcnapi.Features{APIV2: true})
	if _, err := f.UpdateLoadBalancer(a.ID, lb("10.96.0.1", 80)); !hcnapi.IsNotImplemented(err) {
		t.Errorf("update without ModifyLoadbalancer: %v", err)
	}
}

func TestFakeFailuresAndStop(t *testing.T) {
	f := NewFake(AllFeatures())
	f.AddNetwork("cbr0", hcnapi.NetworkTypeL2Bridge)
	boom := errors.New("boom")
	f.FailNext(OpGetNetworkByName, boom)
	if _, err := f.GetNetworkByName("cbr0"); !errors.Is(err, boom) {
		t.Errorf("injected failure: %v", err)
	}
	if _, err := f.GetNetworkByName("cbr0"); err != nil {
		t.Errorf("after the injected failure: %v", err)
	}
	f.SetRunning(false)
	if _, err := f.ListLoadBalancers(); err != HNSNotRunningError {
		t.Errorf("stopped: %v", err)
	}
	f.SetRunning(true)
	if got := f.Calls()[OpGetNetworkByName]; got != 2 || f.TotalCalls() != 3 {
		t.Errorf("calls = %v", f.Calls())
	}
	old, _ := f.GetNetworkByName("cbr0")
	n := f.RecreateNetwork("cbr0")
	if n.ID == old.ID {
		t.Errorf("recreated network kept its ID")
	}
}
