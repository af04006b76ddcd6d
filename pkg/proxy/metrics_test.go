package proxy

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	compmetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
)

func TestChangeMetrics(t *testing.T) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeIPTables)
	value := func(m compmetrics.GaugeMetric) float64 {
		v, err := testutil.GetGaugeMetricValue(m)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	count := func(m compmetrics.CounterMetric) float64 {
		v, err := testutil.GetCounterMetricValue(m)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	svcTotal, epTotal := count(metrics.ServiceChangesTotal), count(metrics.EndpointChangesTotal)

	sct := NewServiceChangeTracker(v1.IPv4Protocol, nil, nil)
	sct.Update(nil, svc("ns", "a", func(s *v1.Service) {
		s.Spec.ClusterIP = "10.0.0.1"
		s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
	}))
	sct.Update(nil, svc("ns", "b", func(s *v1.Service) {
		s.Spec.ClusterIP = "10.0.0.2"
		s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
	}))
	if got := count(metrics.ServiceChangesTotal) - svcTotal; got != 2 {
		t.Errorf("service changes total grew by %v, want 2", got)
	}
	if got := value(metrics.ServiceChangesPending); got != 2 {
		t.Errorf("service changes pending = %v, want 2", got)
	}
	ServicePortMap{}.Update(sct)
	if got := value(metrics.ServiceChangesPending); got != 0 {
		t.Errorf("service changes pending after sync = %v, want 0", got)
	}

	ect := NewEndpointsChangeTracker(v1.IPv4Protocol, testNode, nil, nil)
	s := slice("ns", "a", "a-1", []string{"10.1.0.1"}, "p:80/TCP")
	ect.EndpointSliceUpdate(s, false)
	ect.EndpointSliceUpdate(s, false) // no change: counted in total, not pending
	if got := count(metrics.EndpointChangesTotal) - epTotal; got != 2 {
		t.Errorf("endpoint changes total grew by %v, want 2", got)
	}
	if got := value(metrics.EndpointChangesPending); got != 1 {
		t.Errorf("endpoint changes pending = %v, want 1", got)
	}
	EndpointsMap{}.Update(ect)
	if got := value(metrics.EndpointChangesPending); got != 0 {
		t.Errorf("endpoint changes pending after sync = %v, want 0", got)
	}
}
