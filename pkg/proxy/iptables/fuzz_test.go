//go:build linux

package iptables

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// Whatever names, ports and addresses a Service or EndpointSlice carries,
// a sync either programs it or skips it with a log: the restore input must
// always be accepted (the fake applies iptables-restore's parsing rules).
func FuzzSyncArbitraryObjects(f *testing.F) {
	f.Add("ns", "svc", "p80", "10.0.0.1", int32(80), int32(30080), "10.0.1.1", int32(8080), "TCP")
	f.Add(`n"s`, "s vc", "p\\", "garbage", int32(0), int32(-1), "::1", int32(70000), "UDP")
	f.Add("ns", "svc", "", "fd00::1", int32(65535), int32(0), "fd00::2", int32(1), "SCTP")
	f.Fuzz(func(t *testing.T, ns, name, portName, clusterIP string, port, nodePort int32, epIP string, epPort int32, proto string) {
		fam := families[0]
		if strings.Contains(clusterIP, ":") {
			fam = families[1]
		}
		env := newTestEnv(t, fam, envConfig{})
		env.p.setLogger(klog.Background().V(10)) // quiet
		svc := st.NewService(ns, name, func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.ClusterIP = clusterIP
			s.Spec.Ports = []v1.ServicePort{st.ServicePort(portName, port, v1.Protocol(proto), nodePort)}
		})
		slice := st.Slice(ns, name, name+"-1", st.AddressTypeOf(fam.family), []discovery.EndpointPort{st.SlicePort(portName, epPort, v1.Protocol(proto))}, st.EP{IP: epIP, Node: "node2"})
		env.p.OnServiceAdd(svc)
		env.p.OnEndpointSliceAdd(slice)
		env.p.OnServiceSynced()
		env.p.OnEndpointSlicesSynced()
		if env.p.NeedsFullSync() {
			t.Fatalf("sync failed for service %q/%q port %q %q:%d nodePort %d endpoint %q:%d %q; restore input:\n%s",
				ns, name, portName, clusterIP, port, nodePort, epIP, epPort, proto, env.ipt.LastRestoreInput())
		}
	})
}
