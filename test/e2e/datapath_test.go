//go:build linux

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func hostPort(ip string, port int32) string { return net.JoinHostPort(ip, strconv.Itoa(int(port))) }

// datapathWorld is the world of TestDatapath: pods and the Services the cases use.
type datapathWorld struct {
	*world
	kp  *kubeProxy
	dir string

	client             *pod // on node-1, endpoint of nothing
	a1, a2, a3, b1, b2 *pod
	hairpin            *pod
	l1, r1             *pod // local (node-1) and remote (node-2) endpoints for traffic policies
	u1, u2             *pod // UDP backend and its replacement
	t1, t2             *pod // terminating fallback

	services map[string]svc
}

func newDatapathWorld(t *testing.T, mode string) *datapathWorld {
	w := &datapathWorld{world: newWorld(t), dir: t.TempDir(), services: map[string]svc{}}
	w.client = w.addPod("client", 0, 50)
	w.a1, w.a2, w.a3 = w.addPod("a1", 0, 11), w.addPod("a2", 0, 12), w.addPod("a3", 0, 13)
	w.b1, w.b2 = w.addPod("b1", 1, 11), w.addPod("b2", 1, 12)
	w.hairpin = w.addPod("hairpin", 0, 20)
	w.l1, w.r1 = w.addPod("l1", 0, 30), w.addPod("r1", 1, 30)
	w.u1, w.u2 = w.addPod("u1", 0, 40), w.addPod("u2", 1, 40)
	w.t1, w.t2 = w.addPod("t1", 0, 41), w.addPod("t2", 0, 42)

	writeManifest(t, w.dir, "cluster", w.clusterObjects()...)
	for _, s := range []svc{
		{name: "web", ip4: "198.19.0.10", port: 80, eps: ready(w.a1, w.a2, w.b1)},
		{name: "np", typ: v1.ServiceTypeNodePort, ip4: "198.19.0.11", port: 80, nodePort: 30080, eps: ready(w.a1, w.b1)},
		{name: "extip", ip4: "198.19.0.12", port: 80, externalIPs: []string{"198.18.100.10"}, eps: ready(w.a1, w.b1)},
		{name: "lb", typ: v1.ServiceTypeLoadBalancer, ip4: "198.19.0.13", port: 80, nodePort: 30081,
			lbIP: "198.18.100.20", sourceRanges: []string{lanPrefix4 + ".100/32"}, eps: ready(w.a1, w.b1)},
		{name: "affinity", ip4: "198.19.0.14", port: 80, affinity: 2, eps: ready(w.a1, w.a2, w.a3, w.b1)},
		{name: "etp-local", typ: v1.ServiceTypeLoadBalancer, ip4: "198.19.0.15", port: 80, nodePort: 30082, lbIP: "198.18.100.30",
			eTPLocal: true, hcNodePort: 30300, eps: ready(w.l1, w.r1)},
		{name: "etp-remote", typ: v1.ServiceTypeLoadBalancer, ip4: "198.19.0.16", port: 80, nodePort: 30083, lbIP: "198.18.100.31",
			eTPLocal: true, hcNodePort: 30301, eps: ready(w.r1)},
		{name: "itp-local", ip4: "198.19.0.17", port: 80, iTPLocal: true, eps: ready(w.l1, w.r1)},
		{name: "itp-remote", ip4: "198.19.0.18", port: 80, iTPLocal: true, eps: ready(w.r1)},
		{name: "none", ip4: "198.19.0.19", port: 80},
		{name: "terminating", ip4: "198.19.0.20", port: 80,
			eps: []endpoint{{pod: w.t1}, {pod: w.t2, state: epTerminating}}},
		{name: "hairpin", ip4: "198.19.0.21", port: 80, eps: ready(w.hairpin)},
		{name: "udp", ip4: "198.19.0.22", port: 53, eps: ready(w.u1)},
		{name: "dual", ip4: "198.19.0.23", ip6: "fd00:96::23", port: 80, eps: ready(w.a1, w.b1)},
		{name: "readd", ip4: "198.19.0.24", port: 80, eps: ready(w.a2, w.a3)},
		{name: "portchange", ip4: "198.19.0.25", port: 80, eps: ready(w.a1)},
	} {
		w.services[s.name] = s
		writeService(t, w.dir, s)
	}
	w.kp = w.startKubeProxy(t, mode, w.dir)
	// /healthz is 200 after the first sync, but the first sync may have run before
	// every manifest was read: wait until the last Service answers.
	eventually(t, "the last Service to be programmed", 30*time.Second, func() (bool, string) {
		r, err := askTCP(w.client.ns, hostPort("198.19.0.23", 80), dialOpts{timeout: 500 * time.Millisecond})
		return err == nil, fmt.Sprint(r, err)
	})
	return w
}

// spread connects n times and counts answers per pod; failures fail the test.
func spread(t *testing.T, ns, addr string, n int, o dialOpts) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for range n {
		r, err := askTCP(ns, addr, o)
		if err != nil {
			t.Fatalf("connecting from %s to %s: %v", ns, addr, err)
		}
		seen[r.pod]++
	}
	return seen
}

func wantOnly(t *testing.T, what string, seen map[string]int, pods ...*pod) {
	t.Helper()
	allowed := map[string]bool{}
	for _, p := range pods {
		allowed[p.name] = true
	}
	for name := range seen {
		if !allowed[name] {
			t.Errorf("%s: answered by %s; want only %v (seen %v)", what, name, keys(allowed), seen)
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func wantNoAnswer(t *testing.T, what string, err error, r reply) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: answered by %s, want no answer", what, r.pod)
	}
}

func TestDatapath(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode string) {
		w := newDatapathWorld(t, mode)
		n1 := w.nodes[0]
		n2 := w.nodes[1]

		t.Run("ClusterIP", func(t *testing.T) {
			for _, from := range []struct{ name, ns string }{{"pod", w.client.ns}, {"node", n1.ns}} {
				r, err := askTCP(from.ns, hostPort("198.19.0.10", 80), dialOpts{})
				if err != nil {
					t.Errorf("TCP from %s: %v", from.name, err)
				} else {
					t.Logf("TCP from %s answered by %s (client %s)", from.name, r.pod, r.client)
				}
				r, err = askUDP(from.ns, hostPort("198.19.0.10", 80), 2*time.Second)
				if err != nil {
					t.Errorf("UDP from %s: %v", from.name, err)
				} else {
					t.Logf("UDP from %s answered by %s (client %s)", from.name, r.pod, r.client)
				}
			}
			// A pod's own address survives on the way to a ClusterIP (no masquerade
			// for traffic from the cluster CIDR).
			seen := map[string]bool{}
			for range 20 {
				r, err := askTCP(w.client.ns, hostPort("198.19.0.10", 80), dialOpts{})
				if err != nil {
					t.Fatal(err)
				}
				seen[r.client] = true
			}
			if len(seen) != 1 || !seen[w.client.ip4] {
				t.Errorf("backends saw client addresses %v, want only %s", keys(seen), w.client.ip4)
			}
		})

		t.Run("LoadSpread", func(t *testing.T) {
			seen := spread(t, w.client.ns, hostPort("198.19.0.10", 80), 60, dialOpts{})
			t.Logf("60 connections spread as %v", seen)
			wantOnly(t, "web", seen, w.a1, w.a2, w.b1)
			for _, p := range []*pod{w.a1, w.a2, w.b1} {
				if seen[p.name] == 0 {
					t.Errorf("endpoint %s got none of 60 connections: %v", p.name, seen)
				}
			}
		})

		t.Run("NodePort", func(t *testing.T) {
			seen := spread(t, w.ext, hostPort(n1.lan4, 30080), 20, dialOpts{})
			wantOnly(t, "NodePort", seen, w.a1, w.b1)
			if len(seen) != 2 {
				t.Errorf("NodePort reached %v, want both endpoints", seen)
			}
			// eTP Cluster: the source is masqueraded, or replies from node-2's pod
			// would go straight back to the client.
			r, err := askTCP(w.ext, hostPort(n1.lan4, 30080), dialOpts{})
			if err != nil {
				t.Fatal(err)
			}
			if r.client == lanPrefix4+".100" {
				t.Errorf("eTP Cluster NodePort kept the client address %s", r.client)
			}
			if _, err := askUDP(w.ext, hostPort(n1.lan4, 30080), 2*time.Second); err != nil {
				t.Errorf("UDP NodePort: %v", err)
			}
		})

		t.Run("ExternalIP", func(t *testing.T) {
			seen := spread(t, w.ext, hostPort("198.18.100.10", 80), 10, dialOpts{})
			wantOnly(t, "externalIP", seen, w.a1, w.b1)
		})

		t.Run("LoadBalancer", func(t *testing.T) {
			seen := spread(t, w.ext, hostPort("198.18.100.20", 80), 10, dialOpts{src: lanPrefix4 + ".100"})
			wantOnly(t, "LB from an allowed source", seen, w.a1, w.b1)
			r, err := askTCP(w.ext, hostPort("198.18.100.20", 80), dialOpts{src: lanPrefix4 + ".101", timeout: time.Second})
			wantNoAnswer(t, "LB from a source outside loadBalancerSourceRanges", err, r)
			// The NodePort behind the LB is not restricted by source ranges.
			if _, err := askTCP(w.ext, hostPort(n1.lan4, 30081), dialOpts{src: lanPrefix4 + ".101"}); err != nil {
				t.Errorf("LB's NodePort from another source: %v", err)
			}
		})

		t.Run("SessionAffinity", func(t *testing.T) {
			addr := hostPort("198.19.0.14", 80)
			first, err := askTCP(w.client.ns, addr, dialOpts{})
			if err != nil {
				t.Fatal(err)
			}
			seen := spread(t, w.client.ns, addr, 15, dialOpts{})
			wantOnly(t, "sticky connections", seen, w.pods[first.pod])
			// A node-originated client is another client IP with its own affinity,
			// and that affinity also sticks.
			nodeSeen := spread(t, n1.ns, addr, 5, dialOpts{})
			if len(nodeSeen) != 1 {
				t.Errorf("node's connections spread over %v, want one pod", nodeSeen)
			}
			if mode == modeIPVS {
				w.checkIPVSAffinityOutlivesTimeout(t, addr, first.pod)
				return
			}
			// timeoutSeconds=2: after 2.5s idle the choice is made afresh. With 4
			// endpoints, 8 rounds all landing on the same pod has probability 4^-8.
			changed := false
			for round := 0; round < 8 && !changed; round++ {
				time.Sleep(2500 * time.Millisecond)
				r, err := askTCP(w.client.ns, addr, dialOpts{})
				if err != nil {
					t.Fatal(err)
				}
				changed = r.pod != first.pod
				if !changed {
					// Affinity renews on use: make sure that is what happened.
					continue
				}
				t.Logf("after %d idle round(s) of 2.5s the client moved from %s to %s", round+1, first.pod, r.pod)
			}
			if !changed {
				t.Errorf("affinity never expired: always %s", first.pod)
			}
		})

		t.Run("ExternalTrafficPolicyLocal", func(t *testing.T) {
			seen := map[string]int{}
			for range 10 {
				r, err := askTCP(w.ext, hostPort(n1.lan4, 30082), dialOpts{src: lanPrefix4 + ".100"})
				if err != nil {
					t.Fatal(err)
				}
				seen[r.pod]++
				if r.client != lanPrefix4+".100" {
					t.Errorf("eTP Local: backend saw client %s, want the real client %s.100", r.client, lanPrefix4)
				}
			}
			wantOnly(t, "eTP Local", seen, w.l1)
			// node-1 has no local endpoint of etp-remote: external traffic gets nothing.
			r, err := askTCP(w.ext, hostPort(n1.lan4, 30083), dialOpts{timeout: time.Second})
			wantNoAnswer(t, "eTP Local NodePort without a local endpoint", err, r)
			// Internal traffic to that Service is not restricted.
			if _, err := askTCP(w.client.ns, hostPort("198.19.0.16", 80), dialOpts{}); err != nil {
				t.Errorf("ClusterIP of an eTP Local Service without a local endpoint: %v", err)
			}
			for _, hc := range []struct {
				port  int
				count int
				code  int
			}{{30300, 1, http.StatusOK}, {30301, 0, http.StatusServiceUnavailable}} {
				code, body, err := httpGet(w.ext, fmt.Sprintf("http://%s:%d/", n1.lan4, hc.port))
				if err != nil {
					t.Errorf("healthCheckNodePort %d: %v", hc.port, err)
					continue
				}
				var got struct {
					Service        struct{ Namespace, Name string }
					LocalEndpoints int `json:"localEndpoints"`
				}
				if err := json.Unmarshal([]byte(body), &got); err != nil {
					t.Errorf("healthCheckNodePort %d: %v in %q", hc.port, err, body)
				}
				if code != hc.code || got.LocalEndpoints != hc.count {
					t.Errorf("healthCheckNodePort %d = %d %s, want %d with localEndpoints %d", hc.port, code, body, hc.code, hc.count)
				}
			}
		})

		t.Run("InternalTrafficPolicyLocal", func(t *testing.T) {
			seen := spread(t, w.client.ns, hostPort("198.19.0.17", 80), 10, dialOpts{})
			wantOnly(t, "iTP Local", seen, w.l1)
			r, err := askTCP(w.client.ns, hostPort("198.19.0.18", 80), dialOpts{timeout: time.Second})
			wantNoAnswer(t, "iTP Local without a local endpoint", err, r)
		})

		t.Run("NoEndpointsRejected", func(t *testing.T) {
			_, err := askTCP(w.client.ns, hostPort("198.19.0.19", 80), dialOpts{})
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("Service without endpoints: %v, want connection refused", err)
			}
			_, err = askTCP(n1.ns, hostPort("198.19.0.19", 80), dialOpts{})
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("Service without endpoints, from the node: %v, want connection refused", err)
			}
		})

		t.Run("TerminatingFallback", func(t *testing.T) {
			addr := hostPort("198.19.0.20", 80)
			seen := spread(t, w.client.ns, addr, 15, dialOpts{})
			wantOnly(t, "ready endpoint preferred over terminating", seen, w.t1)
			s := w.services["terminating"]
			s.eps = []endpoint{{pod: w.t2, state: epTerminating}}
			writeService(t, w.dir, s)
			took := eventually(t, "traffic to fall back to the terminating endpoint", 10*time.Second, func() (bool, string) {
				r, err := askTCP(w.client.ns, addr, dialOpts{timeout: time.Second})
				return err == nil && r.pod == w.t2.name, fmt.Sprint(r, err)
			})
			t.Logf("fallback took %v", took.Round(time.Millisecond))
			seen = spread(t, w.client.ns, addr, 10, dialOpts{})
			wantOnly(t, "only terminating endpoints", seen, w.t2)
		})

		t.Run("Hairpin", func(t *testing.T) {
			for _, ask := range []func() (reply, error){
				func() (reply, error) { return askTCP(w.hairpin.ns, hostPort("198.19.0.21", 80), dialOpts{}) },
				func() (reply, error) { return askUDP(w.hairpin.ns, hostPort("198.19.0.21", 80), 2*time.Second) },
			} {
				r, err := ask()
				if err != nil {
					t.Fatalf("pod to its own Service: %v", err)
				}
				if r.pod != w.hairpin.name {
					t.Errorf("answered by %s", r.pod)
				}
				// Without masquerade the pod would answer itself directly and the
				// reply would not match the connection.
				if r.client == w.hairpin.ip4 {
					t.Errorf("hairpin traffic kept the pod's own address")
				}
			}
		})

		t.Run("UDPConntrackCleanup", func(t *testing.T) {
			addr := hostPort("198.19.0.22", 53)
			for _, from := range []struct{ name, ns string }{{"pod", w.client.ns}} {
				u, err := newUDPClient(from.ns, addr)
				if err != nil {
					t.Fatal(err)
				}
				defer u.close()
				r, err := u.ask(2 * time.Second)
				if err != nil || r.pod != w.u1.name {
					t.Fatalf("before the change: %v %v", r, err)
				}
				// Replace the only backend. u1 keeps running, so a stale conntrack
				// entry would keep delivering to it.
				s := w.services["udp"]
				s.eps = ready(w.u2)
				writeService(t, w.dir, s)
				took := eventually(t, "UDP from the same socket to reach the new pod", syncPeriod+changeSlack(t), func() (bool, string) {
					r, err := u.ask(200 * time.Millisecond)
					return err == nil && r.pod == w.u2.name, fmt.Sprint(r, err)
				})
				t.Logf("UDP flow moved to the new backend %v after the manifest edit (sync period %v)", took.Round(time.Millisecond), syncPeriod)
			}
		})

		t.Run("EndpointRemovedAndReadded", func(t *testing.T) {
			addr := hostPort("198.19.0.24", 80)
			wantOnly(t, "before", spread(t, w.client.ns, addr, 10, dialOpts{}), w.a2, w.a3)
			s := w.services["readd"]
			s.eps = ready(w.a2)
			writeService(t, w.dir, s)
			// a3 keeps serving, so only the rules can keep new connections from it.
			eventually(t, "connections to stop reaching the removed endpoint", syncPeriod+changeSlack(t), func() (bool, string) {
				seen := spread(t, w.client.ns, addr, 10, dialOpts{})
				return len(seen) == 1 && seen[w.a2.name] == 10, fmt.Sprint(seen)
			})
			s.eps = ready(w.a2, w.a3)
			writeService(t, w.dir, s)
			eventually(t, "the re-added endpoint to be reached again", syncPeriod+changeSlack(t), func() (bool, string) {
				seen := spread(t, w.client.ns, addr, 10, dialOpts{})
				return seen[w.a3.name] > 0, fmt.Sprint(seen)
			})
		})

		t.Run("ServicePortChange", func(t *testing.T) {
			if _, err := askTCP(w.client.ns, hostPort("198.19.0.25", 80), dialOpts{}); err != nil {
				t.Fatalf("before the change: %v", err)
			}
			s := w.services["portchange"]
			s.port = 8081
			writeService(t, w.dir, s)
			eventually(t, "the new port to answer and the old one not", syncPeriod+changeSlack(t), func() (bool, string) {
				_, errNew := askTCP(w.client.ns, hostPort("198.19.0.25", 8081), dialOpts{timeout: 500 * time.Millisecond})
				_, errOld := askTCP(w.client.ns, hostPort("198.19.0.25", 80), dialOpts{timeout: 500 * time.Millisecond})
				return errNew == nil && errOld != nil, fmt.Sprintf("new port: %v, old port: %v", errNew, errOld)
			})
		})

		t.Run("DualStackClusterIP", func(t *testing.T) {
			for _, ip := range []string{"198.19.0.23", "fd00:96::23"} {
				seen := spread(t, w.client.ns, hostPort(ip, 80), 10, dialOpts{})
				wantOnly(t, ip, seen, w.a1, w.b1)
				if _, err := askUDP(w.client.ns, hostPort(ip, 80), 2*time.Second); err != nil {
					t.Errorf("UDP to %s: %v", ip, err)
				}
				if _, err := askTCP(n1.ns, hostPort(ip, 80), dialOpts{}); err != nil {
					t.Errorf("from the node to %s: %v", ip, err)
				}
			}
			// In both families a pod's own address survives on the way to a ClusterIP:
			// the pod ranges are inside --cluster-cidr. (This world's IPv6 cluster CIDR
			// once left its pods out, and every IPv6 pod was masqueraded unnoticed.)
			for _, c := range []struct{ svc, client string }{{"198.19.0.23", w.client.ip4}, {"fd00:96::23", w.client.ip6}} {
				for range 6 {
					r, err := askTCP(w.client.ns, hostPort(c.svc, 80), dialOpts{})
					if err != nil {
						t.Errorf("TCP to %s: %v", c.svc, err)
					} else if r.client != c.client {
						t.Errorf("TCP to %s answered by %s, which saw client %s, want the pod's own %s", c.svc, r.pod, r.client, c.client)
					}
				}
			}
		})
		_ = n2
	})
}

// checkIPVSAffinityOutlivesTimeout is the expiry half of SessionAffinity in ipvs mode,
// where upstream behaves differently from the iptables and nftables modes: ClientIP
// affinity is an IPVS persistent service with timeoutSeconds as its persistence timeout
// (pkg/proxy/ipvs/proxier.go of v1.37.2: serv.Flags |= FlagPersistent, serv.Timeout =
// StickyMaxAgeSeconds()), and the kernel keeps a persistence template alive while any
// connection it placed is still in IPVS's connection table (ip_vs_conn_expire re-arms a
// template that still controls connections), where a closed TCP connection stays in
// TIME_WAIT for IPVS's own 120 s. So a client idle for longer than timeoutSeconds is
// still sent to the same endpoint, and that is what is checked here: two idle periods
// longer than the timeout, the same pod both times, and the template in the IPVS table.
func (w *datapathWorld) checkIPVSAffinityOutlivesTimeout(t *testing.T, addr, pod string) {
	t.Helper()
	for round := range 2 {
		time.Sleep(2500 * time.Millisecond)
		r, err := askTCP(w.client.ns, addr, dialOpts{})
		if err != nil {
			t.Fatal(err)
		}
		if r.pod != pod {
			t.Errorf("ipvs mode: after idle round %d of 2.5s (timeoutSeconds 2) the client moved from %s to %s; IPVS keeps the persistence template while its connections are in TIME_WAIT", round+1, pod, r.pod)
		}
	}
	conns, err := nsExec(w.nodes[0].ns, "ipvsadm", "-Lnc")
	if err != nil {
		t.Fatalf("ipvsadm -Lnc: %v\n%s", err, conns)
	}
	// A template is the entry with the client's address and port 0 (its state column
	// reads NONE or, on 6.1, ASSURED).
	template := false
	for _, line := range strings.Split(conns, "\n") {
		f := strings.Fields(line)
		template = template || len(f) == 6 && f[3] == w.client.ip4+":0" && f[4] == addr
	}
	if !template {
		t.Errorf("ipvs mode: no persistence template for %s to %s in the IPVS table:\n%s", w.client.ip4, addr, conns)
	}
}
