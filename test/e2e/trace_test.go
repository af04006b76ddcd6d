//go:build linux

package e2e

import (
	"encoding/json"
	"errors"
	"net"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// TestTracePredictsDatapath proves `kube-proxy trace` against real
// connections: for each datapath case, the trace computed by the binary
// from the live rules of node-1's namespace (iptables-save / nft -j, read
// through --netns) must predict what the connection then does: which
// endpoints can answer, whether the backend sees the client's own address
// (no masquerade) or not, or that it is refused, or gets no answer.
func TestTracePredictsDatapath(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode string) {
		if _, err := exec.LookPath("nsenter"); err != nil {
			t.Skipf("kube-proxy trace --netns needs nsenter: %v", err)
		}
		w := newDatapathWorld(t, mode)
		n1 := w.nodes[0]
		ext100, ext101 := lanPrefix4+".100", lanPrefix4+".101"

		type probe struct {
			name   string
			ns     string // where the client runs
			src    string // its source address (bound when external)
			iif    string // where the packet enters node-1; "" from node-1 itself
			dst    string
			proto  string
			n      int // connections to make
			within []*pod
		}
		fromPod := func(name string, p *pod, dst, proto string, within ...*pod) probe {
			return probe{name: name, ns: p.ns, src: p.ip4, iif: "br0", dst: dst, proto: proto, n: 4, within: within}
		}
		ext := func(name, src, dst, proto string, within ...*pod) probe {
			return probe{name: name, ns: w.ext, src: src, iif: "eth0", dst: dst, proto: proto, n: 4, within: within}
		}
		node := func(name, src, dst, proto string, within ...*pod) probe {
			return probe{name: name, ns: n1.ns, src: src, dst: dst, proto: proto, n: 4, within: within}
		}
		probes := []probe{
			fromPod("ClusterIP TCP from a pod", w.client, hostPort("198.19.0.10", 80), "tcp", w.a1, w.a2, w.b1),
			fromPod("ClusterIP UDP from a pod", w.client, hostPort("198.19.0.10", 80), "udp", w.a1, w.a2, w.b1),
			node("ClusterIP TCP from the node", n1.lan4, hostPort("198.19.0.10", 80), "tcp", w.a1, w.a2, w.b1),
			node("ClusterIP UDP from the node", n1.lan4, hostPort("198.19.0.10", 80), "udp", w.a1, w.a2, w.b1),
			ext("NodePort TCP", ext100, hostPort(n1.lan4, 30080), "tcp", w.a1, w.b1),
			ext("NodePort UDP", ext100, hostPort(n1.lan4, 30080), "udp", w.a1, w.b1),
			ext("externalIP", ext100, hostPort("198.18.100.10", 80), "tcp", w.a1, w.b1),
			ext("LoadBalancer from an allowed source", ext100, hostPort("198.18.100.20", 80), "tcp", w.a1, w.b1),
			ext("LoadBalancer from another source", ext101, hostPort("198.18.100.20", 80), "tcp"),
			ext("the LoadBalancer's NodePort from another source", ext101, hostPort(n1.lan4, 30081), "tcp", w.a1, w.b1),
			ext("eTP Local NodePort with a local endpoint", ext100, hostPort(n1.lan4, 30082), "tcp", w.l1),
			ext("eTP Local NodePort without a local endpoint", ext100, hostPort(n1.lan4, 30083), "tcp"),
			fromPod("ClusterIP of an eTP Local Service without a local endpoint", w.client, hostPort("198.19.0.16", 80), "tcp", w.r1),
			fromPod("iTP Local with a local endpoint", w.client, hostPort("198.19.0.17", 80), "tcp", w.l1),
			fromPod("iTP Local without a local endpoint", w.client, hostPort("198.19.0.18", 80), "tcp"),
			fromPod("no endpoints from a pod", w.client, hostPort("198.19.0.19", 80), "tcp"),
			node("no endpoints from the node", n1.lan4, hostPort("198.19.0.19", 80), "tcp"),
			fromPod("terminating endpoint only as a fallback", w.client, hostPort("198.19.0.20", 80), "tcp", w.t1),
			fromPod("hairpin TCP", w.hairpin, hostPort("198.19.0.21", 80), "tcp", w.hairpin),
			fromPod("hairpin UDP", w.hairpin, hostPort("198.19.0.21", 80), "udp", w.hairpin),
			fromPod("UDP Service", w.client, hostPort("198.19.0.22", 53), "udp", w.u1),
			fromPod("dual-stack IPv4", w.client, hostPort("198.19.0.23", 80), "tcp", w.a1, w.b1),
			{name: "dual-stack IPv6 from a pod", ns: w.client.ns, src: w.client.ip6, iif: "br0", dst: hostPort("fd00:96::23", 80), proto: "tcp", n: 4, within: []*pod{w.a1, w.b1}},
			node("dual-stack IPv6 from the node", n1.lan6, hostPort("fd00:96::23", 80), "tcp", w.a1, w.b1),
		}
		for _, pr := range probes {
			t.Run(pr.name, func(t *testing.T) {
				rep := w.trace(t, mode, pr.src, pr.iif, pr.dst, pr.proto)
				want := w.predict(t, rep)
				n := pr.n
				if want.kind == "no answer" {
					// Each attempt waits out its timeout; one says it.
					n = 1
				}
				got := w.observe(pr.ns, pr.src, pr.iif == "eth0", pr.dst, pr.proto, n)
				w.check(t, rep, want, got, pr.src, pr.iif != "")
				// The trace also names the endpoints the harness expects.
				if want.kind == "answer" {
					var exp []string
					for _, p := range pr.within {
						exp = append(exp, p.name)
					}
					sort.Strings(exp)
					if !slices.Equal(want.pods, exp) {
						t.Errorf("trace predicts endpoints %v, the datapath case expects %v", want.pods, exp)
					}
				} else if len(pr.within) > 0 {
					t.Errorf("trace predicts %s, the datapath case expects answers from %d pods", want.kind, len(pr.within))
				}
			})
		}

		// Session affinity lives in kernel state (iptables' recent lists,
		// nftables' affinity sets): once the client has connected, the
		// trace of the live rules must send it where it went, alone.
		t.Run("session affinity", func(t *testing.T) {
			addr := hostPort("198.19.0.14", 80)
			before := w.predict(t, w.trace(t, mode, w.client.ip4, "br0", addr, "tcp"))
			first, err := askTCP(w.client.ns, addr, dialOpts{})
			if err != nil {
				t.Fatal(err)
			}
			// The affinity timeout is 2s: trace and probe at once.
			rep := w.trace(t, mode, w.client.ip4, "br0", addr, "tcp")
			after := w.predict(t, rep)
			got := w.observe(w.client.ns, "", false, addr, "tcp", 3)
			if len(before.pods) != 4 {
				t.Errorf("before any connection: trace predicts %v, want the 4 endpoints", before.pods)
			}
			if !slices.Equal(after.pods, []string{first.pod}) || rep.Result.Outcomes[0].AffinityHit == "" {
				t.Errorf("after a connection to %s: trace predicts %v (affinity hit %q), want only %s", first.pod, after.pods, rep.Result.Outcomes[0].AffinityHit, first.pod)
			}
			w.check(t, rep, after, got, w.client.ip4, true)
		})
	})
}

// traceReport is the subset of `kube-proxy trace -o json` the test reads.
type traceReport struct {
	Rules  string        `json:"rules"`
	Result *trace.Result `json:"result"`
}

func (w *datapathWorld) trace(t *testing.T, mode, src, iif, dst, proto string) traceReport {
	t.Helper()
	args := []string{"trace", "--netns", w.nodes[0].ns, "--proxy-mode", proxyMode(mode), "--from", src, "--to", dst + "/" + proto, "-o", "json"}
	if mode == modeIPTablesLegacy {
		args = append(args, "--iptables-backend", "legacy")
	}
	if iif == "" {
		args = append(args, "--from-host")
	} else {
		args = append(args, "--in-interface", iif)
	}
	var rep traceReport
	if out := runTraceJSON(t, w.kp.bin, args, &rep); rep.Result == nil {
		t.Fatalf("kube-proxy trace -o json: no result\n%s", out)
	}
	if len(rep.Result.Unknowns) > 0 {
		t.Errorf("the trace meets rules it does not model: %+v", rep.Result.Unknowns)
	}
	return rep
}

// runTraceJSON runs the kube-proxy binary bin with args (a trace with -o json) and
// decodes what it prints into rep, failing the test if it fails or prints no JSON.
// It returns the output, for messages.
func runTraceJSON(t *testing.T, bin string, args []string, rep any) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kube-proxy %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if err := json.Unmarshal(out, rep); err != nil {
		t.Fatalf("kube-proxy trace -o json: %v\n%s", err, out)
	}
	return out
}

// prediction is what a trace says a connection will do.
type prediction struct {
	kind string   // "answer", "refused", "no answer"
	pods []string // for "answer": the pods that can answer, sorted
	masq bool     // for "answer": the backend sees the node's address
}

func (w *datapathWorld) predict(t *testing.T, rep traceReport) prediction {
	t.Helper()
	byAddr := map[string]string{}
	w.mu.Lock()
	for _, p := range w.pods {
		byAddr[hostPort(p.ip4, echoPort)] = p.name
		byAddr[hostPort(p.ip6, echoPort)] = p.name
	}
	w.mu.Unlock()
	var pr prediction
	kinds := map[string]bool{}
	masq := map[bool]bool{}
	for _, o := range rep.Result.Outcomes {
		switch o.Verdict {
		case trace.Accept:
			name, ok := byAddr[o.DNAT]
			if !ok {
				t.Fatalf("trace outcome %s does not reach a pod", o.Key())
			}
			kinds["answer"] = true
			pr.pods = append(pr.pods, name)
			masq[o.Masquerade] = true
		case trace.Reject:
			kinds["refused"] = true
		case trace.Drop:
			kinds["no answer"] = true
		default:
			t.Fatalf("trace outcome %s: %s", o.Key(), o.Reason)
		}
	}
	if len(kinds) != 1 || len(masq) > 1 {
		t.Fatalf("trace predicts a mix of outcomes, which no datapath case has: %+v", rep.Result.Outcomes)
	}
	for k := range kinds {
		pr.kind = k
	}
	pr.masq = masq[true]
	sort.Strings(pr.pods)
	pr.pods = slices.Compact(pr.pods)
	return pr
}

// observation is what real connections did.
type observation struct {
	kind    string
	pods    map[string]bool
	clients map[string]bool // source addresses the backends saw
	errs    []string
}

func (w *datapathWorld) observe(ns, src string, bind bool, addr, proto string, n int) observation {
	ob := observation{pods: map[string]bool{}, clients: map[string]bool{}}
	kinds := map[string]bool{}
	for range n {
		var r reply
		var err error
		if proto == "udp" {
			r, err = askUDP(ns, addr, time.Second)
		} else {
			o := dialOpts{timeout: time.Second}
			if bind {
				o.src = src
			}
			r, err = askTCP(ns, addr, o)
		}
		switch {
		case err == nil:
			kinds["answer"] = true
			ob.pods[r.pod] = true
			ob.clients[r.client] = true
		case errors.Is(err, syscall.ECONNREFUSED):
			kinds["refused"] = true
		case isTimeout(err):
			kinds["no answer"] = true
		default:
			kinds["error"] = true
			ob.errs = append(ob.errs, err.Error())
		}
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	ob.kind = strings.Join(ks, "+")
	return ob
}

func (w *datapathWorld) check(t *testing.T, rep traceReport, want prediction, got observation, src string, fromOutside bool) {
	t.Helper()
	var text strings.Builder
	_ = rep.Result.WriteText(&text, false)
	if got.kind != want.kind {
		t.Errorf("trace predicts %q, the connections got %q %v\ntrace (%s):\n%s", want.kind, got.kind, got.errs, rep.Rules, text.String())
		return
	}
	for p := range got.pods {
		if !slices.Contains(want.pods, p) {
			t.Errorf("answered by %s, which the trace does not predict (%v)\n%s", p, want.pods, text.String())
		}
	}
	if want.kind != "answer" || !fromOutside {
		// From the node itself the source is the node's address either way.
		return
	}
	for c := range got.clients {
		kept := c == src || net.ParseIP(c).Equal(net.ParseIP(src))
		if kept == want.masq {
			t.Errorf("trace predicts masquerade=%v, but the backend saw client %s (source %s)\n%s", want.masq, c, src, text.String())
		}
	}
}
