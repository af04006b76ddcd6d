//go:build linux

package e2e

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// load is a steady stream of short TCP connections from one namespace to one
// address, counted.
type load struct {
	ns, addr string
	stop     chan struct{}
	wg       sync.WaitGroup

	total, failed atomic.Int64
	mu            sync.Mutex
	errs          []string
	perPod        map[string]int
}

// startLoad runs workers connections in parallel, each pausing pace between
// connections so the load stays steady on a loaded 2-core machine.
func startLoad(ns, addr string, workers int, pace time.Duration) *load {
	l := &load{ns: ns, addr: addr, stop: make(chan struct{}), perPod: map[string]int{}}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				r, err := askTCP(ns, addr, dialOpts{timeout: 3 * time.Second})
				l.total.Add(1)
				l.mu.Lock()
				if err != nil {
					l.failed.Add(1)
					if len(l.errs) < 20 {
						l.errs = append(l.errs, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
					}
				} else {
					l.perPod[r.pod]++
				}
				l.mu.Unlock()
				time.Sleep(pace)
			}
		}()
	}
	return l
}

func (l *load) finish() (total, failed int64, errs []string) {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total.Load(), l.failed.Load(), l.errs
}

// ruleWatch polls the node's ruleset and counts polls where needle was missing,
// to show that rules are never flushed, not even briefly.
type ruleWatch struct {
	stop          chan struct{}
	done          chan struct{}
	polls, misses atomic.Int64
}

func watchRules(kp *kubeProxy, needle string) *ruleWatch {
	rw := &ruleWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(rw.done)
		for {
			select {
			case <-rw.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			rw.polls.Add(1)
			if !strings.Contains(kp.rules(), needle) {
				rw.misses.Add(1)
			}
		}
	}()
	return rw
}

func (rw *ruleWatch) finish() (polls, misses int64) {
	close(rw.stop)
	<-rw.done
	return rw.polls.Load(), rw.misses.Load()
}

// figure reports a reliability result in the test log and on stdout (go test -v),
// and appends it to $E2E_FIGURES when set, for the README.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf("RELIABILITY "+format, args...)
	t.Log(line)
	fmt.Println(line)
	figuresMu.Lock()
	figures = append(figures, line)
	figuresMu.Unlock()
	if path := os.Getenv("E2E_FIGURES"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = fmt.Fprintln(f, line)
			_ = f.Close()
		}
	}
}

// figures collects the reliability lines for the summary TestMain prints.
var (
	figuresMu sync.Mutex
	figures   []string
)

// printFigures prints every reliability figure of the run as one block, so a CI
// log shows them together after the test output.
func printFigures() {
	figuresMu.Lock()
	defer figuresMu.Unlock()
	if len(figures) == 0 {
		return
	}
	fmt.Printf("RELIABILITY SUMMARY (%d figures)\n", len(figures))
	for _, f := range figures {
		fmt.Println("  " + strings.TrimPrefix(f, "RELIABILITY "))
	}
}

const churnIP = "198.19.1.1"

func TestReliability(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode string) {
		w := newWorld(t)
		dir := t.TempDir()
		client := w.addPod("client", 0, 50)
		// A pool of backends on both nodes; the churn rotates through them.
		var pool []*pod
		for i := range 8 {
			pool = append(pool, w.addPod(fmt.Sprintf("be%d", i), i%2, 60+i))
		}
		writeManifest(t, dir, "cluster", w.clusterObjects()...)
		s := svc{name: "churn", ip4: churnIP, port: 80, eps: ready(pool[0], pool[1], pool[2])}
		writeService(t, dir, s)
		kp := w.startKubeProxy(t, mode, dir)
		addr := hostPort(churnIP, 80)
		eventually(t, "the Service to answer", 30*time.Second, func() (bool, string) {
			r, err := askTCP(client.ns, addr, dialOpts{timeout: 500 * time.Millisecond})
			return err == nil, fmt.Sprint(r, err)
		})

		t.Run("Churn", func(t *testing.T) {
			l := startLoad(client.ns, addr, 2, 5*time.Millisecond)
			active := []*pod{pool[0], pool[1], pool[2]}
			next, changes, started := 3, 0, time.Now()
			write := func(eps []endpoint) {
				s.eps = eps
				writeService(t, dir, s)
				changes++
			}
			for l.total.Load() < 1000 || changes < 18 {
				if time.Since(started) > 90*time.Second {
					t.Fatalf("churn did not reach 1000 connections in 90s (%d)", l.total.Load())
				}
				// Scale up: a new ready endpoint.
				p := pool[next%len(pool)]
				next++
				if p.stopped {
					p.mu.Lock()
					p.stopped = false
					if err := p.start(); err != nil {
						p.mu.Unlock()
						t.Fatal(err)
					}
					p.mu.Unlock()
				}
				active = append(active, p)
				write(ready(active...))
				time.Sleep(500 * time.Millisecond)
				// Graceful removal of the oldest: terminating first, then gone.
				old := active[0]
				active = active[1:]
				eps := ready(active...)
				write(append(eps, endpoint{pod: old, state: epTerminating}))
				time.Sleep(500 * time.Millisecond)
				write(ready(active...))
				// The pod exits only once no rule can send it new connections.
				eventually(t, "rules to drop "+old.name, 10*time.Second, func() (bool, string) {
					return !strings.Contains(kp.rules(), old.ip4+":"), ""
				})
				time.Sleep(200 * time.Millisecond)
				old.stop()
			}
			total, failed, errs := l.finish()
			figure(t, "mode=%s churn: %d connections, %d failed, %d endpoint changes in %v (%s)",
				mode, total, failed, changes, time.Since(started).Round(time.Second), fmt.Sprint(l.perPod))
			if failed != 0 {
				t.Errorf("%d of %d connections failed during churn:\n%s", failed, total, strings.Join(errs, "\n"))
			}
		})

		t.Run("Restart", func(t *testing.T) {
			eventually(t, "the Service to answer", 10*time.Second, func() (bool, string) {
				r, err := askTCP(client.ns, addr, dialOpts{timeout: 500 * time.Millisecond})
				return err == nil, fmt.Sprint(r, err)
			})
			rw := watchRules(kp, churnIP)
			l := startLoad(client.ns, addr, 2, 5*time.Millisecond)
			const restarts = 3
			var downtime time.Duration
			for range restarts {
				time.Sleep(time.Second)
				kp.kill()
				t0 := time.Now()
				time.Sleep(500 * time.Millisecond)
				kp.start()
				kp.waitHealthy(30 * time.Second)
				downtime += time.Since(t0)
			}
			time.Sleep(time.Second)
			total, failed, errs := l.finish()
			polls, misses := rw.finish()
			figure(t, "mode=%s restart: %d SIGKILL+restart cycles (%v until healthy), %d connections, %d failed; rules checked %d times, missing %d times",
				mode, restarts, (downtime / restarts).Round(time.Millisecond), total, failed, polls, misses)
			if failed != 0 {
				t.Errorf("%d of %d connections failed across restarts:\n%s", failed, total, strings.Join(errs, "\n"))
			}
			if misses != 0 {
				t.Errorf("the Service's rules were missing in %d of %d polls across restarts", misses, polls)
			}
		})

		t.Run("ExternalFlush", func(t *testing.T) {
			type flush struct {
				what string
				cmds [][]string
				// canary: kube-proxy watches for this kind of flush and repairs it
				// by itself; otherwise only the next sync does.
				canary bool
			}
			triggers := 0
			var flushes []flush
			if usesIPTables(mode) {
				// What a firewall reload does: every table flushed and its chains
				// deleted. kube-proxy notices through its KUBE-PROXY-CANARY chains
				// (flushes that keep the chains: TestFlushRepair). ipvs mode has no
				// canary, as upstream's, but every one of its syncs is full and one
				// runs each sync period, which repairs this in the same time.
				ipt := iptablesCmd(mode, "iptables")
				var cmds [][]string
				for _, table := range []string{"nat", "filter", "mangle"} {
					cmds = append(cmds, []string{ipt, "-t", table, "-F"}, []string{ipt, "-t", table, "-X"})
				}
				flushes = []flush{{ipt + " -F && " + ipt + " -X in nat, filter and mangle", cmds, true}}
			} else {
				flushes = []flush{
					// No canary in nftables mode: once per sync period kube-proxy
					// checks that its table still exists and rebuilds it if not.
					{"nft delete table ip kube-proxy", [][]string{{"nft", "delete", "table", "ip", "kube-proxy"}}, true},
				}
			}
			for _, f := range flushes {
				eventually(t, "the Service to answer", 10*time.Second, func() (bool, string) {
					r, err := askTCP(client.ns, addr, dialOpts{timeout: 500 * time.Millisecond})
					return err == nil, fmt.Sprint(r, err)
				})
				for _, c := range f.cmds {
					if out, err := nsExec(w.nodes[0].ns, c[0], c[1:]...); err != nil {
						t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
					}
				}
				if _, err := askTCP(client.ns, addr, dialOpts{timeout: 300 * time.Millisecond}); err == nil {
					// Not fatal: the repair may already have happened.
					t.Logf("%s: the Service still answered right after the flush", f.what)
				}
				// "Within one sync": the canary poll or the sync itself, plus the
				// time to apply it on a busy machine.
				limit := syncPeriod + time.Second
				took, restored := waitAnswer(client.ns, addr, limit)
				if restored {
					figure(t, "mode=%s external flush (%s): Service answered again after %v (sync period %v)",
						mode, f.what, took.Round(time.Millisecond), syncPeriod)
					continue
				}
				if f.canary {
					figure(t, "mode=%s external flush (%s): NOT restored within %v (sync period %v)",
						mode, f.what, took.Round(time.Millisecond), syncPeriod)
					t.Errorf("%s: the Service did not answer again within %v\nkube-proxy log tail:\n%s", f.what, took, tail(kp.out.String(), 3000))
					// A restart does a full sync: rules back for the next case.
					kp.kill()
					kp.start()
					kp.waitHealthy(30 * time.Second)
					continue
				}
				// Without a canary the repair comes with the next sync, which any
				// change triggers: here an unrelated new Service.
				triggers++
				writeService(t, dir, svc{name: fmt.Sprintf("trigger-%d", triggers), ip4: fmt.Sprintf("198.19.1.%d", 100+triggers), port: 80})
				// The first sync finds the table gone and fails; the retry a sync
				// period later is a full sync.
				limit = 2*syncPeriod + time.Second
				took2, restored := waitAnswer(client.ns, addr, limit)
				if !restored {
					figure(t, "mode=%s external flush (%s): not repaired on its own within %v, and NOT restored within %v of the next change (sync period %v)",
						mode, f.what, took.Round(time.Millisecond), took2.Round(time.Millisecond), syncPeriod)
					t.Errorf("%s: the Service did not answer again within %v of the next change", f.what, took2)
					continue
				}
				figure(t, "mode=%s external flush (%s): not repaired on its own within %v (no canary, syncs only on changes, as upstream); Service answered again %v after the next change (sync period %v)",
					mode, f.what, took.Round(time.Millisecond), took2.Round(time.Millisecond), syncPeriod)
			}
		})
	})
}

// waitAnswer polls addr from ns until it answers or limit passes.
func waitAnswer(ns, addr string, limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < limit {
		if _, err := askTCP(ns, addr, dialOpts{timeout: 200 * time.Millisecond}); err == nil {
			return time.Since(start), true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start), false
}
