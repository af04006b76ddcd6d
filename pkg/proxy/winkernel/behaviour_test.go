package winkernel

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
	hcntest "k8s.io/kube-proxy/pkg/proxy/winkernel/testing"
)

func mac(ip string) string { return conjureMAC("02-11", net.ParseIP(ip)) }

// web is the scenarios' Service: port 80/TCP to 8080, with tweaks.
func web(f fam, tweak func(*v1.Service)) *v1.Service {
	return st.NewService("ns", "web", func(s *v1.Service) {
		s.Spec.ClusterIP = f.svc(1)
		s.Spec.Ports = []v1.ServicePort{st.ServicePort("http", 80, v1.ProtocolTCP, 0)}
		if tweak != nil {
			tweak(s)
		}
	})
}

// exposed makes web a LoadBalancer Service with a node port, an external
// IP and an ingress IP.
func exposed(f fam, s *v1.Service) {
	s.Spec.Type = v1.ServiceTypeLoadBalancer
	s.Spec.Ports[0].NodePort = 30080
	s.Spec.ExternalIPs = []string{f.extIP}
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: f.lb}}
}

func local(f fam, s *v1.Service) {
	s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = 32000
}

// webSlice has one endpoint on this node and one on the other, port 8080.
func webSlice(f fam, eps ...st.EP) *discovery.EndpointSlice {
	if len(eps) == 0 {
		eps = []st.EP{{IP: f.pod(1), Node: testNode}, {IP: f.rpod(1), Node: "node2"}}
	}
	return st.Slice("ns", "web", "web-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("http", 8080, v1.ProtocolTCP)}, eps...)
}

func TestBehaviour(t *testing.T) {
	dsrOff := func() *hcnapi.Features {
		f := hcntest.AllFeatures()
		f.DSR = false
		return &f
	}
	tests := []struct {
		name string
		opts envOptions
		// before runs on the fake HNS before the proxier syncs.
		before func(e *env)
		objs   func(f fam) []any
		want   func(f fam) []string
	}{{
		name: "cluster IP over a local and a remote endpoint (L2Bridge)",
		objs: func(f fam) []any { return []any{web(f, nil), webSlice(f)} },
		want: func(f fam) []string {
			return []string{
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + sortedIPs(f.pod(1), f.rpod(1)) + flags(f.v6()),
				"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
			}
		},
	}, {
		name: "node port, external IP and ingress IP, external policy Cluster",
		objs: func(f fam) []any { return []any{web(f, func(s *v1.Service) { exposed(f, s) }), webSlice(f)} },
		want: func(f fam) []string {
			both := sortedIPs(f.pod(1), f.rpod(1))
			return []string{
				"LB * 30080/TCP->8080 eps=" + both + flags(f.v6(), "LocalRoutedVIP", "VipExternalIP"),
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + both + flags(f.v6()),
				"LB " + f.lb + " 80/TCP->8080 eps=" + both + flags(f.v6(), "VipExternalIP"),
				"LB " + f.extIP + " 80/TCP->8080 eps=" + both + flags(f.v6(), "VipExternalIP"),
				"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
			}
		},
	}, {
		name: "external policy Local: external load balancers use local endpoints with DSR",
		objs: func(f fam) []any {
			return []any{web(f, func(s *v1.Service) { exposed(f, s); local(f, s) }), webSlice(f)}
		},
		want: func(f fam) []string {
			return []string{
				"LB * 30080/TCP->8080 eps=" + f.pod(1) + flags("DSR", f.v6(), "LocalRoutedVIP", "VipExternalIP"),
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + sortedIPs(f.pod(1), f.rpod(1)) + flags(f.v6()),
				"LB " + f.lb + " 80/TCP->8080 eps=" + f.pod(1) + flags("DSR", f.v6(), "VipExternalIP"),
				"LB " + f.extIP + " 80/TCP->8080 eps=" + f.pod(1) + flags("DSR", f.v6(), "VipExternalIP"),
				"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
			}
		},
	}, {
		name: "external policy Local without DSR support: local endpoints, no DSR",
		opts: envOptions{features: dsrOff()},
		objs: func(f fam) []any {
			return []any{web(f, func(s *v1.Service) { exposed(f, s); local(f, s) }), webSlice(f)}
		},
		want: func(f fam) []string {
			return []string{
				"LB * 30080/TCP->8080 eps=" + f.pod(1) + flags(f.v6(), "LocalRoutedVIP", "VipExternalIP"),
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + sortedIPs(f.pod(1), f.rpod(1)) + flags(f.v6()),
				"LB " + f.lb + " 80/TCP->8080 eps=" + f.pod(1) + flags(f.v6(), "VipExternalIP"),
				"LB " + f.extIP + " 80/TCP->8080 eps=" + f.pod(1) + flags(f.v6(), "VipExternalIP"),
				"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
			}
		},
	}, {
		name: "internal policy Local: the cluster IP uses local endpoints, no remote endpoint",
		objs: func(f fam) []any {
			return []any{web(f, func(s *v1.Service) { s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal) }), webSlice(f)}
		},
		want: func(f fam) []string {
			return []string{"LB " + f.svc(1) + " 80/TCP->8080 eps=" + f.pod(1) + flags(f.v6())}
		},
	}, {
		name: "internal and external policy Local: everything local",
		objs: func(f fam) []any {
			return []any{web(f, func(s *v1.Service) {
				exposed(f, s)
				local(f, s)
				s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
			}), webSlice(f)}
		},
		want: func(f fam) []string {
			return []string{
				"LB * 30080/TCP->8080 eps=" + f.pod(1) + flags("DSR", f.v6(), "LocalRoutedVIP", "VipExternalIP"),
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + f.pod(1) + flags(f.v6()),
				"LB " + f.lb + " 80/TCP->8080 eps=" + f.pod(1) + flags("DSR", f.v6(), "VipExternalIP"),
				"LB " + f.extIP + " 80/TCP->8080 eps=" + f.pod(1) + flags("DSR", f.v6(), "VipExternalIP"),
			}
		},
	}, {
		name: "ClientIP session affinity: source IP distribution",
		objs: func(f fam) []any {
			return []any{web(f, func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](100)}}
			}), webSlice(f)}
		},
		want: func(f fam) []string {
			return []string{
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + sortedIPs(f.pod(1), f.rpod(1)) + flags(f.v6()) + " dist=2",
				"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
			}
		},
	}, {
		name: "--enable-dsr: cluster IP load balancers are DSR",
		opts: envOptions{config: func(c *kubeproxyconfig.KubeProxyConfiguration) { c.Winkernel.EnableDSR = true }},
		objs: func(f fam) []any { return []any{web(f, nil), webSlice(f)} },
		want: func(f fam) []string {
			return []string{
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + sortedIPs(f.pod(1), f.rpod(1)) + flags("DSR", f.v6()),
				"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
			}
		},
	}, {
		name: "preserve-destination: node port and ingress local, ingress through the MUX keeping the VIP",
		objs: func(f fam) []any {
			return []any{web(f, func(s *v1.Service) {
				exposed(f, s)
				s.Annotations = map[string]string{"preserve-destination": "true"}
			}), webSlice(f)}
		},
		want: func(f fam) []string {
			both := sortedIPs(f.pod(1), f.rpod(1))
			return []string{
				"LB * 30080/TCP->8080 eps=" + f.pod(1) + flags(f.v6(), "LocalRoutedVIP", "VipExternalIP"),
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + both + flags(f.v6()),
				"LB " + f.lb + " 80/TCP->8080 eps=" + f.pod(1) + flags("DSR", f.v6(), "UseMux", "PreserveDIP", "VipExternalIP"),
				"LB " + f.extIP + " 80/TCP->8080 eps=" + both + flags(f.v6(), "VipExternalIP"),
				"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
			}
		},
	}, {
		name: "--forward-healthcheck-vip, external policy Local: the health check node port on the ingress IP goes to the root endpoint",
		opts: envOptions{config: func(c *kubeproxyconfig.KubeProxyConfiguration) { c.Winkernel.ForwardHealthCheckVip = true }},
		before: func(e *env) {
			e.hns.AddEndpoint(testNetwork, hcnapi.Endpoint{Name: testRootEP, IPs: []string{e.f.node}, MAC: "00-15-5d-00-00-02"})
		},
		objs: func(f fam) []any {
			return []any{web(f, func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.Ports[0].NodePort = 30080
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: f.lb}}
				local(f, s)
			}), webSlice(f)}
		},
		want: func(f fam) []string {
			return []string{
				"LB * 30080/TCP->8080 eps=" + f.pod(1) + flags("DSR", f.v6(), "LocalRoutedVIP", "VipExternalIP"),
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + sortedIPs(f.pod(1), f.rpod(1)) + flags(f.v6()),
				"LB " + f.lb + " 32000/TCP->32000 eps=gw" + flags(f.v6()),
				"LB " + f.lb + " 80/TCP->8080 eps=" + f.pod(1) + flags("DSR", f.v6(), "VipExternalIP"),
				"EP local " + f.node + " mac=00-15-5d-00-00-02 name=" + testRootEP,
				"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
			}
		},
	}, {
		name: "--forward-healthcheck-vip, external policy Cluster: kube-proxy's healthz port, once per Service",
		opts: envOptions{config: func(c *kubeproxyconfig.KubeProxyConfiguration) { c.Winkernel.ForwardHealthCheckVip = true }},
		before: func(e *env) {
			e.hns.AddEndpoint(testNetwork, hcnapi.Endpoint{Name: testRootEP, IPs: []string{e.f.node}, MAC: "00-15-5d-00-00-02"})
		},
		objs: func(f fam) []any {
			return []any{web(f, func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("http", 80, v1.ProtocolTCP, 30080), st.ServicePort("dns", 53, v1.ProtocolUDP, 30053)}
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: f.lb}}
			}), st.Slice("ns", "web", "web-1", st.AddressTypeOf(f.family),
				[]discovery.EndpointPort{st.SlicePort("http", 8080, v1.ProtocolTCP), st.SlicePort("dns", 5353, v1.ProtocolUDP)},
				st.EP{IP: f.pod(1), Node: testNode})}
		},
		want: func(f fam) []string {
			return []string{
				"LB * 30053/UDP->5353 eps=" + f.pod(1) + flags(f.v6(), "LocalRoutedVIP", "VipExternalIP"),
				"LB * 30080/TCP->8080 eps=" + f.pod(1) + flags(f.v6(), "LocalRoutedVIP", "VipExternalIP"),
				"LB " + f.svc(1) + " 53/UDP->5353 eps=" + f.pod(1) + flags(f.v6()),
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + f.pod(1) + flags(f.v6()),
				"LB " + f.lb + " 10256/TCP->10256 eps=gw" + flags(f.v6()),
				"LB " + f.lb + " 53/UDP->5353 eps=" + f.pod(1) + flags(f.v6(), "VipExternalIP"),
				"LB " + f.lb + " 80/TCP->8080 eps=" + f.pod(1) + flags(f.v6(), "VipExternalIP"),
				"EP local " + f.node + " mac=00-15-5d-00-00-02 name=" + testRootEP,
			}
		},
	}, {
		name: "no endpoints: no load balancer",
		objs: func(f fam) []any { return []any{web(f, func(s *v1.Service) { exposed(f, s) })} },
		want: func(f fam) []string { return nil },
	}, {
		name: "not ready endpoints are left out",
		objs: func(f fam) []any {
			return []any{web(f, nil), webSlice(f, st.EP{IP: f.pod(1), Node: testNode}, st.EP{IP: f.rpod(1), Node: "node2", NotReady: true})}
		},
		want: func(f fam) []string {
			return []string{"LB " + f.svc(1) + " 80/TCP->8080 eps=" + f.pod(1) + flags(f.v6())}
		},
	}, {
		name: "ready endpoints win over terminating ones",
		objs: func(f fam) []any {
			return []any{web(f, nil), webSlice(f, st.EP{IP: f.pod(1), Node: testNode, Terminating: true}, st.EP{IP: f.rpod(1), Node: "node2"})}
		},
		want: func(f fam) []string {
			return []string{
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + f.rpod(1) + flags(f.v6()),
				"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
			}
		},
	}, {
		name: "all endpoints terminating: the brain falls back to the serving ones",
		objs: func(f fam) []any {
			return []any{web(f, nil), webSlice(f,
				st.EP{IP: f.pod(1), Node: testNode, Terminating: true},
				st.EP{IP: f.pod(2), Node: testNode, Terminating: true, NotServing: true},
				st.EP{IP: f.rpod(1), Node: "node2", Terminating: true})}
		},
		want: func(f fam) []string {
			return []string{
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + sortedIPs(f.pod(1), f.rpod(1)) + flags(f.v6()),
				"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
			}
		},
	}, {
		name: "a local endpoint HNS does not have is left out",
		objs: func(f fam) []any {
			return []any{web(f, nil), webSlice(f, st.EP{IP: f.pod(20), Node: testNode}, st.EP{IP: f.rpod(1), Node: "node2"})}
		},
		want: func(f fam) []string {
			return []string{
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + f.rpod(1) + flags(f.v6()),
				"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)),
			}
		},
	}, {
		name: "UDP and SCTP protocol numbers; a named target port takes the endpoints' port",
		objs: func(f fam) []any {
			return []any{web(f, func(s *v1.Service) {
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("dns", 53, v1.ProtocolUDP, 0), st.ServicePort("sig", 3868, v1.ProtocolSCTP, 0)}
			}), st.Slice("ns", "web", "web-1", st.AddressTypeOf(f.family),
				[]discovery.EndpointPort{st.SlicePort("dns", 5353, v1.ProtocolUDP), st.SlicePort("sig", 3869, v1.ProtocolSCTP)},
				st.EP{IP: f.pod(1), Node: testNode})}
		},
		want: func(f fam) []string {
			return []string{
				"LB " + f.svc(1) + " 3868/SCTP->3869 eps=" + f.pod(1) + flags(f.v6()),
				"LB " + f.svc(1) + " 53/UDP->5353 eps=" + f.pod(1) + flags(f.v6()),
			}
		},
	}, {
		name: "overlay: source VIP endpoint, service VIP endpoint, remote endpoint with its node's provider address",
		opts: envOptions{networkType: "Overlay"},
		objs: func(f fam) []any { return []any{web(f, nil), webSlice(f)} },
		want: func(f fam) []string {
			return []string{
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + sortedIPs(f.pod(1), f.rpod(1)) + flags(f.v6()) + " src=" + f.sourceVIP,
				"EP local " + f.sourceVIP + " mac=" + testHostMAC,
				"EP remote " + f.rpod(1) + " mac=" + mac(f.rpod(1)) + " pa=" + f.otherNode,
				"EP remote " + f.svc(1) + " mac=" + testHostMAC + " pa=" + f.node,
			}
		},
	}, {
		name: "overlay: an endpoint outside the pod network gets the node IP as provider address and source",
		opts: envOptions{networkType: "Overlay"},
		objs: func(f fam) []any {
			return []any{web(f, nil), webSlice(f, st.EP{IP: f.pod(1), Node: testNode}, st.EP{IP: f.public})}
		},
		want: func(f fam) []string {
			return []string{
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + sortedIPs(f.pod(1), f.public) + flags(f.v6()) + " src=" + f.node,
				"EP local " + f.sourceVIP + " mac=" + testHostMAC,
				"EP remote " + f.public + " mac=" + mac(f.public) + " pa=" + f.node,
				"EP remote " + f.svc(1) + " mac=" + testHostMAC + " pa=" + f.node,
			}
		},
	}, {
		name: "overlay: an endpoint on another node's own address uses the node IP as source",
		opts: envOptions{networkType: "Overlay"},
		objs: func(f fam) []any {
			return []any{web(f, nil), webSlice(f, st.EP{IP: f.otherNode, Node: "node2"})}
		},
		want: func(f fam) []string {
			return []string{
				"LB " + f.svc(1) + " 80/TCP->8080 eps=" + f.otherNode + flags(f.v6()) + " src=" + f.node,
				"EP local " + f.sourceVIP + " mac=" + testHostMAC,
				"EP remote " + f.otherNode + " mac=" + mac(f.otherNode) + " pa=" + f.otherNode,
				"EP remote " + f.svc(1) + " mac=" + testHostMAC + " pa=" + f.node,
			}
		},
	}}
	for _, tc := range tests {
		for _, f := range families {
			t.Run(string(f.family)+"/"+tc.name, func(t *testing.T) {
				e := newEnv(t, f, tc.opts)
				if tc.before != nil {
					tc.before(e)
				}
				e.start(tc.objs(f)...)
				want := tc.want(f)
				slices.Sort(want[:countLBs(want)])
				slices.Sort(want[countLBs(want):])
				if diff := cmp.Diff(want, e.state()); diff != "" {
					t.Errorf("HNS state (-want +got):\n%s", diff)
				}
				// The same objects synced by a fresh proxier over what the
				// first one left converge with no HNS write.
				e.hns.ResetCalls()
				e.p = e.newProxier()
				e.start(tc.objs(f)...)
				if diff := cmp.Diff(want, e.state()); diff != "" {
					t.Errorf("after a restart (-want +got):\n%s", diff)
				}
				for _, op := range []string{"CreateLoadBalancer", "UpdateLoadBalancer", "DeleteLoadBalancer", "CreateEndpoint", "DeleteEndpoint"} {
					if n := e.hns.Calls()[op]; n != 0 {
						t.Errorf("after a restart: %d %s calls, want none (adopted)", n, op)
					}
				}
			})
		}
	}
}

func sortedIPs(ips ...string) string {
	slices.Sort(ips)
	return strings.Join(ips, ",")
}

func countLBs(s []string) int {
	n := 0
	for _, x := range s {
		if strings.HasPrefix(x, "LB ") {
			n++
		}
	}
	return n
}

// flags renders the flag list of a described load balancer.
func flags(names ...string) string {
	var n []string
	for _, x := range names {
		x = strings.TrimPrefix(x, ",")
		if x != "" {
			n = append(n, x)
		}
	}
	if len(n) == 0 {
		return ""
	}
	return " flags=" + strings.Join(n, ",")
}
