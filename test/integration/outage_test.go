//go:build linux

package integration

import (
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/kube-proxy/test/kubeapiserver"
	"k8s.io/kube-proxy/test/kubeproxybin"
)

// outageSyncPeriod is the proxies' --iptables-sync-period (also nftables mode's sync
// period): upstream's default. "Converges within one sync" is measured against it.
const outageSyncPeriod = 30 * time.Second

// restartHold is how long a kube-proxy restarted without an API server is watched
// (rules polled, traffic counted, process alive) before the next step.
const restartHold = 3 * time.Second

// TestAPIServerOutages runs our kube-proxy and upstream's v1.37.2, each in iptables and
// nftables mode (four nodes, one API server), through API server outages with real
// traffic flowing the whole time, and checks ours in every phase:
//
//	apiserver-down      the API server killed for a while, nothing changing: no failed
//	                    connection, rules stay;
//	restart-while-down  kube-proxy SIGTERMed, restarted, SIGKILLed, restarted, all without
//	                    an API server: it neither flushes nor exits, traffic keeps flowing;
//	apiserver-back      the API server returns; an endpoint change and a new Service made
//	                    then converge within one sync period;
//	after-compaction    a partition during which Services change, etcd is compacted and
//	                    the API server restarted (the watches must relist: "too old
//	                    resource version"); the changes converge, the deleted Service goes;
//	deleted-while-down  a Service deleted while kube-proxy is stopped loses its rules
//	                    after the restart.
//
// In each phase both /healthz and /livez of the health server and of the metrics server
// are read from every proxy, and ours must answer what upstream's answers, except where
// docs/differences.md says why ours differs (outageHealthDifferences). Upstream's figures
// are logged beside ours; its own failures are reported, not asserted.
//
// Figures are logged as greppable lines:
//
//	OUTAGE-FIGURE impl=ours mode=iptables phase=apiserver-down connections=N failed=0 converge=-
//	OUTAGE-HEALTHZ impl=ours mode=iptables phase=... healthz=200 livez=200 metrics-healthz=200 metrics-livez=404
func TestAPIServerOutages(t *testing.T) {
	requireEnv(t)
	bins := kubeapiserver.RequireBinaries(t)
	upstream := kubeapiserver.RequireUpstreamKubeProxy(t)
	ours := kubeproxybin.Path(t)

	// etcd is started here, not by the server, so the test can compact it.
	dir := t.TempDir()
	etcd, err := kubeapiserver.StartEtcd(bins.Etcd, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	// Its own server: the test kills and restarts it.
	srv := kubeapiserver.Start(t, kubeapiserver.Options{Etcd: etcd, Dir: dir})

	// Endpoints name a node of their own: the Services have no local-traffic policy.
	c := newCluster(t, srv, "outage", "node-outage-pods")
	web := c.createService("web", 80, func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort })
	c.setEndpoints("web", podA)
	gone := c.createService("gone", 81, nil)
	c.setEndpoints("gone", podA)
	webIP, nodePort := web.Spec.ClusterIP, web.Spec.Ports[0].NodePort

	traffic := newTrafficPhases()
	traffic.set("start")
	t.Cleanup(traffic.stop)
	var proxies []*outageProxy
	for _, mode := range []string{"iptables", "nftables"} {
		for _, impl := range []struct{ name, bin string }{{"ours", ours}, {"upstream", upstream}} {
			p := &outageProxy{t: t, impl: impl.name, mode: mode, bin: impl.bin, nodeName: "node-" + impl.name + "-" + mode, traffic: traffic}
			p.node = newProxyNode(t, srv, kubeapiserver.KubeProxy)
			createNodeObject(t, c, p.nodeName)
			proxies = append(proxies, p)
		}
	}
	parallel(proxies, func(p *outageProxy) {
		p.start()
		if d, ok := p.await("first traffic to web", outageSyncPeriod*2, func() bool { return p.node.fetch(webIP, 80) == podA }); !ok {
			// Upstream's await only notes it; without first traffic nothing can be compared.
			t.Errorf("%s: no traffic to web after %s\n%s", p, d, lastLines(p.kp.out.String(), 40))
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	for _, p := range proxies {
		traffic.start(p.String()+" clusterip", p.node.ns, net.JoinHostPort(webIP, "80"))
		// nftables mode serves node ports on the Node's InternalIP only (upstream's
		// default nodePortAddresses "primary"), so both modes are asked there.
		traffic.start(p.String()+" nodeport", p.node.client, net.JoinHostPort(nodeIP, strconv.Itoa(int(nodePort))))
	}

	phase := func(name string) {
		traffic.set(name)
	}
	endPhase := func(name string, converge map[*outageProxy]time.Duration) {
		for _, p := range proxies {
			p.sampleHealth(name)
			conns, failed, firstErr := traffic.result(name, p.String())
			conv := "-"
			if d, ok := converge[p]; ok {
				conv = d.Round(time.Millisecond).String()
			}
			t.Logf("OUTAGE-FIGURE impl=%s mode=%s phase=%s connections=%d failed=%d converge=%s", p.impl, p.mode, name, conns, failed, conv)
			p.expect(failed == 0, "%s: %d of %d connections failed (first: %s)", name, failed, conns, firstErr)
			p.expect(p.kp.running(), "%s: kube-proxy exited: %v", name, p.kp.err)
		}
	}

	phase("steady")
	time.Sleep(time.Second)
	endPhase("steady", nil)

	// (a) The API server crashes; nothing changes meanwhile.
	phase("apiserver-down")
	srv.Kill()
	// Read every second, for longer than a proxy takes to notice (our API probe runs
	// every 10s and gives up after 5s; a sync period has no pending change to miss).
	stopWatch := make(chan struct{})
	var watchers []<-chan struct{}
	for _, p := range proxies {
		watchers = append(watchers, p.watchHealth("apiserver-down", stopWatch))
	}
	time.Sleep(20 * time.Second)
	close(stopWatch)
	for _, w := range watchers {
		<-w
	}
	for _, p := range proxies {
		p.expect(hasIP(ruleset(p.node.ns), webIP), "apiserver-down: rules for web (%s) gone", webIP)
	}
	endPhase("apiserver-down", nil)

	// (b) kube-proxy restarted while the API server is still down, by SIGTERM and by
	// SIGKILL: the rules it finds keep serving, it does not exit.
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		name := "restart-while-down-" + map[syscall.Signal]string{syscall.SIGTERM: "sigterm", syscall.SIGKILL: "sigkill"}[sig]
		phase(name)
		parallel(proxies, func(p *outageProxy) {
			p.restart(sig)
			missing, polls := p.pollRules(webIP, restartHold)
			p.expect(missing == 0, "%s: rules for web missing in %d of %d polls after the restart", name, missing, polls)
		})
		endPhase(name, nil)
	}

	// (c) The API server returns; a change made then converges within one sync.
	phase("apiserver-back")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	c.setEndpoints("web", podB)
	fresh := c.createService("fresh", 82, nil)
	c.setEndpoints("fresh", podA)
	converge := p2map(proxies, func(p *outageProxy) (time.Duration, bool) {
		return p.await("the endpoint change and the new Service", outageSyncPeriod, func() bool {
			return p.node.fetch(webIP, 80) == podB && p.node.fetch(fresh.Spec.ClusterIP, 82) == podA
		})
	})
	endPhase("apiserver-back", converge)

	// (d) A partition while Services change, then an etcd compaction and an API server
	// restart: the proxies' watches cannot resume from their resourceVersion and must
	// list again. Meanwhile the old rules keep serving.
	phase("after-compaction")
	logMark := map[*outageProxy]int{}
	for _, p := range proxies {
		p.node.relay.setCut(true)
		logMark[p] = len(p.kp.out.String())
	}
	c.setEndpoints("web", podA)
	c.deleteService("fresh")
	compacted := c.createService("compacted", 83, nil)
	c.setEndpoints("compacted", podB)
	time.Sleep(time.Second)
	for _, p := range proxies {
		got := p.node.fetch(webIP, 80)
		p.expect(got == podB, "after-compaction: traffic to web while partitioned reached %q, want the old endpoint %s", got, podB)
	}
	rev, err := etcd.Compact()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd compacted at revision %d", rev)
	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for _, p := range proxies {
		p.node.relay.setCut(false)
	}
	converge = p2map(proxies, func(p *outageProxy) (time.Duration, bool) {
		return p.await("the changes made during the partition", outageSyncPeriod, func() bool {
			return p.node.fetch(webIP, 80) == podA && p.node.fetch(compacted.Spec.ClusterIP, 83) == podB &&
				!hasIP(ruleset(p.node.ns), fresh.Spec.ClusterIP)
		})
	})
	// client-go's reflector logs "Caches populated" (at --v=2) after each complete list:
	// a watch that resumed would not log it again.
	for _, p := range proxies {
		since := p.kp.out.String()[logMark[p]:]
		for _, kind := range []string{"*v1.Service", "*v1.EndpointSlice"} {
			n := strings.Count(since, `"Caches populated" type="`+kind+`"`)
			t.Logf("%s: %s listed again %d time(s) after the partition", p, kind, n)
			p.expect(n > 0, "after-compaction: %s's informer did not list again", kind)
		}
	}
	endPhase("after-compaction", converge)

	// (e) A Service deleted while kube-proxy is stopped loses its rules once it is back.
	phase("deleted-while-down")
	parallel(proxies, func(p *outageProxy) { p.stop(syscall.SIGKILL) })
	for _, p := range proxies {
		p.expect(hasIP(ruleset(p.node.ns), gone.Spec.ClusterIP), "deleted-while-down: rules for gone (%s) missing before the restart", gone.Spec.ClusterIP)
	}
	c.deleteService("gone")
	converge = p2map(proxies, func(p *outageProxy) (time.Duration, bool) {
		p.start()
		return p.await("the rules of the Service deleted while it was down to go", outageSyncPeriod, func() bool {
			return !hasIP(ruleset(p.node.ns), gone.Spec.ClusterIP)
		})
	})
	endPhase("deleted-while-down", converge)
	traffic.stop()

	compareHealth(t, proxies)
	for _, p := range proxies {
		for _, n := range p.notes {
			t.Logf("upstream %s differs from the expectation: %s", p.mode, n)
		}
	}
}

// outageProxy is one kube-proxy (ours or upstream's, in one mode) on its own node.
type outageProxy struct {
	t        *testing.T
	impl     string // "ours" or "upstream"
	mode     string
	bin      string
	nodeName string
	node     *proxyNode
	kp       *kubeProxy
	traffic  *trafficPhases

	mu       sync.Mutex
	stopping map[*kubeProxy]bool // processes the test ended (or is ending)
	health   map[string]healthSample
	notes    []string
}

func (p *outageProxy) String() string { return p.impl + "/" + p.mode }

func (p *outageProxy) start() {
	kp := startProxyBinary(p.t, p.bin, p.impl+" kube-proxy", p.node.ns, p.node.kubeconfig, p.mode, p.nodeName,
		"--iptables-sync-period="+outageSyncPeriod.String())
	p.mu.Lock()
	p.kp = kp
	p.mu.Unlock()
	// Runs before startProxyBinary's cleanup kills the process.
	p.t.Cleanup(func() { p.markStopping(kp) })
	// An exit the test did not ask for is reported with the phase it happened in: a
	// kube-proxy giving up on the API server may take longer than the phase that
	// caused it.
	go func() {
		<-kp.exited
		p.mu.Lock()
		asked := p.stopping[kp]
		p.mu.Unlock()
		if !asked {
			p.expect(false, "kube-proxy exited on its own during phase %s: %v", p.traffic.current(), kp.err)
		}
	}()
}

func (p *outageProxy) markStopping(kp *kubeProxy) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping == nil {
		p.stopping = map[*kubeProxy]bool{}
	}
	p.stopping[kp] = true
}

// stop ends kube-proxy with sig and waits for it (SIGKILL after 10s).
func (p *outageProxy) stop(sig syscall.Signal) {
	p.markStopping(p.kp)
	_ = p.kp.cmd.Process.Signal(sig)
	select {
	case <-p.kp.exited:
	case <-time.After(10 * time.Second):
		p.expect(false, "%s did not exit within 10s of %s", p, sig)
		p.kp.stop(0)
	}
}

// restart ends kube-proxy with sig and starts it again.
func (p *outageProxy) restart(sig syscall.Signal) {
	p.stop(sig)
	p.start()
}

// expect fails the test when ours does not meet an expectation; for upstream it notes
// the difference, which the test reports at the end.
func (p *outageProxy) expect(ok bool, format string, args ...any) {
	if ok {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if p.impl == "ours" {
		p.t.Errorf("%s: %s\n%s", p, msg, lastLines(p.kp.out.String(), 30))
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notes = append(p.notes, msg)
}

// await polls cond until it holds or timeout passes, checking that kube-proxy runs, and
// returns how long it took. Ours failing to converge fails the test.
func (p *outageProxy) await(what string, timeout time.Duration, cond func() bool) (time.Duration, bool) {
	began := time.Now()
	for {
		if cond() {
			return time.Since(began), true
		}
		if !p.kp.running() || time.Since(began) > timeout {
			p.expect(false, "%s: not within %s (kube-proxy running: %v)", what, timeout, p.kp.running())
			return time.Since(began), false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pollRules reads the ruleset every 100ms for d and counts the reads without ip.
func (p *outageProxy) pollRules(ip string, d time.Duration) (missing, polls int) {
	for end := time.Now().Add(d); time.Now().Before(end); polls++ {
		if !hasIP(ruleset(p.node.ns), ip) {
			missing++
		}
		time.Sleep(100 * time.Millisecond)
	}
	return missing, polls
}

// healthSample is what the four health endpoints answered during a phase, per
// endpoint the distinct answers in ascending order ("200", or "200,503" if it changed):
// an HTTP status, or 0 when the connection was refused (the server is not up).
type healthSample map[string]string

var healthEndpoints = []struct{ name, addr, path string }{
	{"healthz", healthzAddr, "/healthz"},
	{"livez", healthzAddr, "/livez"},
	{"metrics-healthz", metricsAddr, "/healthz"},
	{"metrics-livez", metricsAddr, "/livez"},
}

func (h healthSample) String() string {
	var parts []string
	for _, e := range healthEndpoints {
		parts = append(parts, e.name+"="+h[e.name])
	}
	return strings.Join(parts, " ")
}

// readHealth adds what the four endpoints answer now to the phase's sample.
func (p *outageProxy) readHealth(phase string) {
	codes := map[string]int{}
	for _, e := range healthEndpoints {
		codes[e.name], _, _ = p.node.ns.get("http://" + e.addr + e.path)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.health == nil {
		p.health = map[string]healthSample{}
	}
	h := p.health[phase]
	if h == nil {
		h = healthSample{}
		p.health[phase] = h
	}
	for name, code := range codes {
		seen := map[string]bool{strconv.Itoa(code): true}
		for _, c := range strings.Split(h[name], ",") {
			if c != "" {
				seen[c] = true
			}
		}
		var list []int
		for c := range seen {
			n, _ := strconv.Atoi(c)
			list = append(list, n)
		}
		sort.Ints(list)
		var strs []string
		for _, n := range list {
			strs = append(strs, strconv.Itoa(n))
		}
		h[name] = strings.Join(strs, ",")
	}
}

// watchHealth reads the endpoints every second until stop is closed: in a phase where
// nothing starts or stops, any change of answer is part of what must match upstream.
func (p *outageProxy) watchHealth(phase string, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			p.readHealth(phase)
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return done
}

// sampleHealth reads the endpoints once more at the end of a phase and logs the sample.
func (p *outageProxy) sampleHealth(phase string) {
	p.readHealth(phase)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.t.Logf("OUTAGE-HEALTHZ impl=%s mode=%s phase=%s %s", p.impl, p.mode, phase, p.health[phase])
}

// healthDifference is an answer of ours that differs from upstream's on purpose.
type healthDifference struct {
	ours string // what ours must answer instead, as in healthSample
	why  string
}

// outageHealthDifferences are the phases and endpoints where ours answers otherwise
// than upstream on purpose; each is in docs/differences.md. Keyed "phase endpoint".
var outageHealthDifferences = func() map[string]healthDifference {
	m := map[string]healthDifference{}
	for _, phase := range []string{"restart-while-down-sigterm", "restart-while-down-sigkill"} {
		// Ours starts its metrics server before it waits for the API server;
		// upstream's comes up only once its Node informer has synced, so until the API
		// server returns it refuses connections (0).
		m[phase+" metrics-healthz"] = healthDifference{"200", "metrics server up while waiting for the API server"}
		m[phase+" metrics-livez"] = healthDifference{"404", "metrics server up while waiting for the API server (no /livez there, as upstream)"}
	}
	return m
}()

// compareHealth fails where ours answered otherwise than upstream in the same mode and
// phase, unless outageHealthDifferences lists it with what ours answered.
func compareHealth(t *testing.T, proxies []*outageProxy) {
	t.Helper()
	byName := map[string]*outageProxy{}
	for _, p := range proxies {
		byName[p.String()] = p
	}
	for _, mode := range []string{"iptables", "nftables"} {
		ours, up := byName["ours/"+mode], byName["upstream/"+mode]
		var phases []string
		for ph := range ours.health {
			phases = append(phases, ph)
		}
		sort.Strings(phases)
		for _, ph := range phases {
			o, u := ours.health[ph], up.health[ph]
			for _, ep := range healthEndpoints {
				e := ep.name
				diff, documented := outageHealthDifferences[ph+" "+e]
				switch {
				case documented && o[e] == diff.ours:
					t.Logf("%s %s %s: ours %s, upstream %s (documented: %s)", mode, ph, e, o[e], u[e], diff.why)
				case documented:
					t.Errorf("%s %s %s: ours answers %s, upstream %s; docs/differences.md says ours answers %s (%s)", mode, ph, e, o[e], u[e], diff.ours, diff.why)
				case o[e] != u[e]:
					t.Errorf("%s %s %s: ours answers %s, upstream %s", mode, ph, e, o[e], u[e])
				}
			}
		}
	}
}

// trafficPhases runs client loops, each making one new TCP connection (an HTTP GET) at
// a time through a Service, and counts attempts and failures per phase and loop.
type trafficPhases struct {
	mu     sync.Mutex
	phase  string
	counts map[[2]string]*trafficCount // {phase, loop owner} -> counts
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

type trafficCount struct {
	attempts, failed int
	firstErr         string
}

func newTrafficPhases() *trafficPhases {
	return &trafficPhases{counts: map[[2]string]*trafficCount{}, done: make(chan struct{})}
}

func (tp *trafficPhases) set(phase string) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.phase = phase
}

// start runs a loop named "<owner> <what>" connecting from ns to addr until stop. A
// connection succeeds when one of the pods answers within a second.
func (tp *trafficPhases) start(name string, ns *netNS, addr string) {
	owner, _, _ := strings.Cut(name, " ")
	client := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{DialContext: ns.dial, DisableKeepAlives: true},
	}
	tp.wg.Add(1)
	go func() {
		defer tp.wg.Done()
		for {
			select {
			case <-tp.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			failure := ""
			resp, err := client.Get("http://" + addr + "/")
			if err != nil {
				failure = err.Error()
			} else {
				buf := make([]byte, 64)
				n, _ := resp.Body.Read(buf)
				resp.Body.Close()
				if body := string(buf[:n]); resp.StatusCode != 200 || (body != podA && body != podB) {
					failure = fmt.Sprintf("status %d %q", resp.StatusCode, body)
				}
			}
			tp.record(owner, name, failure)
		}
	}()
}

func (tp *trafficPhases) record(owner, name, failure string) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	key := [2]string{tp.phase, owner}
	c := tp.counts[key]
	if c == nil {
		c = &trafficCount{}
		tp.counts[key] = c
	}
	c.attempts++
	if failure != "" {
		c.failed++
		if c.firstErr == "" {
			c.firstErr = name + ": " + failure
		}
	}
}

func (tp *trafficPhases) result(phase, owner string) (attempts, failed int, firstErr string) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if c := tp.counts[[2]string{phase, owner}]; c != nil {
		return c.attempts, c.failed, c.firstErr
	}
	return 0, 0, ""
}

func (tp *trafficPhases) current() string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.phase
}

func (tp *trafficPhases) stop() {
	tp.once.Do(func() { close(tp.done) })
	tp.wg.Wait()
}

// parallel runs fn for every proxy at once and waits: the proxies are independent, and
// doing them one after the other would multiply the test's wall time.
func parallel(proxies []*outageProxy, fn func(*outageProxy)) {
	var wg sync.WaitGroup
	for _, p := range proxies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(p)
		}()
	}
	wg.Wait()
}

// p2map is parallel collecting each proxy's convergence time (left out when it did not
// converge).
func p2map(proxies []*outageProxy, fn func(*outageProxy) (time.Duration, bool)) map[*outageProxy]time.Duration {
	var mu sync.Mutex
	out := map[*outageProxy]time.Duration{}
	parallel(proxies, func(p *outageProxy) {
		d, ok := fn(p)
		if ok {
			mu.Lock()
			out[p] = d
			mu.Unlock()
		}
	})
	return out
}

// createNodeObject registers a Node with the node namespace's InternalIP (every node
// namespace uses the same addresses), as a kubelet would.
func createNodeObject(t *testing.T, c *cluster, name string) {
	t.Helper()
	nc := *c
	nc.node = name
	nc.createNode(nodeIP)
	t.Cleanup(func() {
		_ = c.admin.CoreV1().Nodes().Delete(c.ctx, name, metav1.DeleteOptions{})
	})
}
