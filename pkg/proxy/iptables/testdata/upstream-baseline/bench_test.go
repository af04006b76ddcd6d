package ub

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/iptables"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
)

type discard struct {
	last int
	data []byte
}

func (d *discard) EnsureChain(utiliptables.Table, utiliptables.Chain) (bool, error) { return true, nil }
func (d *discard) FlushChain(utiliptables.Table, utiliptables.Chain) error          { return nil }
func (d *discard) DeleteChain(utiliptables.Table, utiliptables.Chain) error         { return nil }
func (d *discard) ChainExists(utiliptables.Table, utiliptables.Chain) (bool, error) { return true, nil }
func (d *discard) EnsureRule(utiliptables.RulePosition, utiliptables.Table, utiliptables.Chain, ...string) (bool, error) {
	return true, nil
}
func (d *discard) DeleteRule(utiliptables.Table, utiliptables.Chain, ...string) error { return nil }
func (d *discard) IsIPv6() bool                                                       { return false }
func (d *discard) Protocol() utiliptables.Protocol                                    { return utiliptables.ProtocolIPv4 }
func (d *discard) SaveInto(utiliptables.Table, *bytes.Buffer) error                   { return nil }
func (d *discard) Restore(_ utiliptables.Table, data []byte, _ utiliptables.FlushFlag, _ utiliptables.RestoreCountersFlag) error {
	d.last = len(data)
	return nil
}
func (d *discard) RestoreAll(data []byte, _ utiliptables.FlushFlag, _ utiliptables.RestoreCountersFlag) error {
	d.last = len(data)
	d.data = append(d.data[:0], data...)
	return nil
}
func (d *discard) Monitor(utiliptables.Chain, []utiliptables.Table, func(), time.Duration, <-chan struct{}) {
}
func (d *discard) Present() error { return nil }

type fakeSysctl struct{}

func (fakeSysctl) GetSysctl(string) (int, error) { return 0, nil }
func (fakeSysctl) SetSysctl(string, int) error   { return nil }

func svcIndex(i int) string { return fmt.Sprintf("172.31.%d.%d", (i+1)/250, (i+1)%250+1) }
func podIndex(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", 100+(i+1)/62500, ((i+1)/250)%250, (i+1)%250+1)
}

func setup(b *testing.B, n, eps int) (*iptables.Proxier, *discard, []*discovery.EndpointSlice) {
	return setupT(b, n, eps)
}

func setupT(b testing.TB, n, eps int) (*iptables.Proxier, *discard, []*discovery.EndpointSlice) {
	ipt := &discard{}
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	cfg.IPTables.MasqueradeBit = ptr.To[int32](14)
	cfg.IPTables.LocalhostNodePorts = ptr.To(true)
	cfg.SyncPeriod = metav1.Duration{Duration: 30 * time.Second}
	cfg.MinSyncPeriod = metav1.Duration{Duration: time.Second}
	ctx := klog.NewContext(context.Background(), klog.Background().V(10))
	p, err := iptables.NewProxier(ctx, cfg, v1.IPv4Protocol, ipt, fakeSysctl{}, proxyutil.NewDetectLocalByCIDR("10.0.0.0/8"),
		"node1", net.ParseIP("192.168.0.2"), nil, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	var slices []*discovery.EndpointSlice
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("svc%d", i)
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: svcIndex(i), ClusterIPs: []string{svcIndex(i)},
			Ports: []v1.ServicePort{{Name: "p80", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}},
		}}
		if i%10 == 0 {
			svc.Spec.Type = v1.ServiceTypeNodePort
			svc.Spec.Ports[0].NodePort = int32(30000 + i%2000)
		}
		p.OnServiceAdd(svc)
		s := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name + "-1", Labels: map[string]string{discovery.LabelServiceName: name}},
			AddressType: discovery.AddressTypeIPv4,
			Ports:       []discovery.EndpointPort{{Name: ptr.To("p80"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}}}
		for j := 0; j < eps; j++ {
			s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{podIndex(i*eps + j)}, NodeName: ptr.To(fmt.Sprintf("node%d", j%7)),
				Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}})
		}
		p.OnEndpointSliceAdd(s)
		slices = append(slices, s)
	}
	p.OnEndpointSlicesSynced()
	p.OnServiceSynced()
	return p, ipt, slices
}

func init() { metrics.RegisterMetrics(kubeproxyconfig.ProxyModeIPTables) }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loopCPU(b *testing.B, body func()) {
	start := cpuTime()
	for b.Loop() {
		body()
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

func BenchmarkUpstreamGenerate(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"1k", 1000}, {"10k", 10000}} {
		b.Run(size.name+"/full", func(b *testing.B) {
			p, ipt, _ := setup(b, size.n, 10)
			b.ReportAllocs()
			loopCPU(b, func() {
				p.OnTopologyChange(nil) // sets needFullSync
				p.OnServiceSynced()     // runs syncProxyRules synchronously
			})
			b.ReportMetric(float64(ipt.last), "restore-bytes")
		})
		b.Run(size.name+"/one-endpoint", func(b *testing.B) {
			p, ipt, slices := setup(b, size.n, 10)
			b.ReportAllocs()
			i := 0
			loopCPU(b, func() {
				upd := slices[0].DeepCopy()
				upd.Endpoints[0].Addresses = []string{podIndex(900000 + i%2)}
				i++
				p.OnEndpointSliceUpdate(slices[0], upd)
				slices[0] = upd
				p.OnServiceSynced()
			})
			b.ReportMetric(float64(ipt.last), "restore-bytes")
		})
	}
}
