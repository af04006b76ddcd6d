//go:build linux

package e2e

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Addresses of the two Services TestFlushRepair watches.
const (
	flushServiceIP = "198.19.2.1" // one endpoint on node-2: answers while its DNAT rules are there
	flushNoEPsIP   = "198.19.2.2" // no endpoints: refused while its reject rule is there
)

// flushRepairSlack is what a repair may take beyond one sync period and one full sync
// (measured from kube-proxy's metrics before each flush): the check itself (iptables -C
// per table, or ipvs mode's jump and virtual server checks) and the wait for a flush in
// progress to finish (300 ms in iptables mode), on a busy 2-core machine.
const flushRepairSlack = 1500 * time.Millisecond

// slackScaleEnv multiplies flushRepairSlack (never the sync period), and how long the
// tests wait for kube-proxy's first sync before they start: the QEMU guest of
// test/vm runs under TCG emulation, where every iptables, nft or ipset exec and a full
// sync take ten times longer or more, so the time the repair's own work takes there is
// not the time it takes on a real machine. The repair must still come by itself,
// without any change to Services or endpoints; the measured time is printed either way.
const slackScaleEnv = "KUBE_PROXY_E2E_SLACK_SCALE"

// slackScale is $KUBE_PROXY_E2E_SLACK_SCALE, 1 when unset.
func slackScale(t *testing.T) float64 {
	v := os.Getenv(slackScaleEnv)
	if v == "" {
		return 1
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 1 {
		t.Fatalf("%s=%q: want a number >= 1", slackScaleEnv, v)
	}
	return f
}

// repairSlack is flushRepairSlack times slackScale.
func repairSlack(t *testing.T) time.Duration {
	return time.Duration(float64(flushRepairSlack) * slackScale(t))
}

// svcChainOfFlush stands for the KUBE-SVC chain of flushServiceIP's Service in a
// command, resolved when it runs.
const svcChainOfFlush = "{KUBE-SVC of the flush Service}"

// serviceChain returns the KUBE-SVC chain KUBE-SERVICES sends ip's port 80 to.
func serviceChain(t *testing.T, ns, mode, ip string) string {
	t.Helper()
	out, err := nsExec(ns, iptablesCmd(mode, "iptables-save"), "-t", "nat")
	if err != nil {
		t.Fatalf("iptables-save: %v\n%s", err, out)
	}
	re := regexp.MustCompile(`(?m)^-A KUBE-SERVICES -d ` + regexp.QuoteMeta(ip) + `/32 .*--dport 80 -j (KUBE-SVC-\S+)$`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no KUBE-SVC chain for %s:80 in:\n%s", ip, out)
	}
	return m[1]
}

// TestFlushRepair flushes kube-proxy's rules behind its back, leaving its chains and
// tables in place, and requires them to be repaired within one sync period without
// any change to Services or endpoints. The deletion of tables and chains is covered
// by TestReliability/ExternalFlush.
func TestFlushRepair(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode string) {
		w := newWorld(t)
		dir := t.TempDir()
		client := w.addPod("client", 0, 50)
		backend := w.addPod("flushed", 1, 60)
		// The probes below ask the Service without endpoints several times a second,
		// and the node's ICMP rate limit (one per second and peer after a burst of
		// six) would otherwise drop some of its rejections.
		sysctls(t, w.nodes[0].ns, "net.ipv4.icmp_ratelimit=0")
		writeManifest(t, dir, "cluster", w.clusterObjects()...)
		writeService(t, dir, svc{name: "flush", ip4: flushServiceIP, port: 80, eps: ready(backend)})
		writeService(t, dir, svc{name: "flush-none", ip4: flushNoEPsIP, port: 80})
		kp := w.startKubeProxy(t, mode, dir)

		// working reports whether both Services behave as programmed: in iptables
		// mode the first depends on the nat table and the second on the filter
		// table; in nftables mode both on the kube-proxy table. Without the rules a
		// connection to either goes to the node's default route, where nothing
		// answers.
		working := func() (bool, string) {
			type result struct {
				r   reply
				err error
			}
			answered, rejected := make(chan result, 1), make(chan result, 1)
			go func() {
				r, err := askTCP(client.ns, hostPort(flushServiceIP, 80), dialOpts{timeout: 200 * time.Millisecond})
				answered <- result{r, err}
			}()
			go func() {
				r, err := askTCP(client.ns, hostPort(flushNoEPsIP, 80), dialOpts{timeout: 200 * time.Millisecond})
				rejected <- result{r, err}
			}()
			a, r := <-answered, <-rejected
			var problems []string
			if a.err != nil || a.r.pod != backend.name {
				problems = append(problems, fmt.Sprintf("Service with an endpoint: %v %v", a.r, a.err))
			}
			if !errors.Is(r.err, syscall.ECONNREFUSED) {
				problems = append(problems, fmt.Sprintf("Service without endpoints: %v, want connection refused", r.err))
			}
			return len(problems) == 0, strings.Join(problems, "; ")
		}
		eventually(t, "both Services to be programmed", 30*time.Second, working)

		type flush struct {
			name string
			cmd  []string
		}
		ipt := func(args ...string) []string { return append([]string{iptablesCmd(mode, "iptables")}, args...) }
		flushes := map[string][]flush{
			// The Service's own KUBE-SVC chain flushed, the canaries left: the
			// top-level chains a periodic sync rewrites do not include it, so
			// only the drift check (once per sync period) repairs it (issue 35).
			modeIPTables: {
				{"iptables -F", ipt("-F")},
				{"iptables -t nat -F", ipt("-t", "nat", "-F")},
				{"iptables -t nat -F KUBE-SVC-...", ipt("-t", "nat", "-F", svcChainOfFlush)},
			},
			modeIPTablesLegacy: {
				{"iptables-legacy -F", ipt("-F")},
				{"iptables-legacy -t nat -F", ipt("-t", "nat", "-F")},
				{"iptables-legacy -t nat -F KUBE-SVC-...", ipt("-t", "nat", "-F", svcChainOfFlush)},
			},
			// Besides the flushed table, what only a comparison of the table's
			// contents finds (the drift check of pkg/proxy/nftables/drift.go):
			// one chain flushed, and the ClusterIP's dispatch element deleted
			// from the service-ips verdict map (its cluster IP is then
			// rejected by cluster-ips-check instead of answered).
			modeNFTables: {
				{"nft flush table ip kube-proxy", []string{"nft", "flush", "table", "ip", "kube-proxy"}},
				{"nft flush chain ip kube-proxy services", []string{"nft", "flush", "chain", "ip", "kube-proxy", "services"}},
				{"nft delete element ip kube-proxy service-ips", []string{"nft", "delete", "element", "ip", "kube-proxy", "service-ips",
					"{", flushServiceIP, ".", "tcp", ".", "80", "}"}},
			},
			// Upstream's ipvs mode has no canary chain: every sync is a full one
			// (syncProxyRules in pkg/proxy/ipvs/proxier.go of v1.37.2 rewrites its
			// iptables rules with one iptables-restore and reconciles every virtual
			// server), and the runner syncs at least once per sync period, so each
			// of these is repaired within one sync period as well.
			modeIPVS: {
				{"iptables -F", ipt("-F")},
				{"iptables -t nat -F", ipt("-t", "nat", "-F")},
				{"ipvsadm -C", []string{"ipvsadm", "-C"}},
			},
		}[mode]
		for _, f := range flushes {
			t.Run(strings.ReplaceAll(f.name, " ", "_"), func(t *testing.T) {
				eventually(t, "both Services to work before the flush", 10*time.Second, working)
				if usesIPTables(mode) && mode != modeIPVS {
					// The canaries are re-created after each repair; a flush before
					// they are back goes unnoticed by the Monitor, and is repaired by
					// the next drift check instead (one sync period, not the Monitor's
					// quicker poll).
					// That window is milliseconds on a real machine and seconds in an
					// emulated guest, where the previous case's repair can still be
					// finishing here: this case is about a flush of a settled node.
					eventually(t, "kube-proxy's canary in every table", 30*time.Second, func() (bool, string) {
						for _, table := range []string{"mangle", "nat", "filter"} {
							out, err := nsExec(w.nodes[0].ns, iptablesCmd(mode, "iptables-save"), "-t", table)
							if err != nil || !strings.Contains(out, "-A KUBE-PROXY-CANARY") {
								return false, fmt.Sprintf("no canary rule in %s (%v)", table, err)
							}
						}
						return true, ""
					})
				}
				// A repair is a full sync: allow what one takes here (the mean so far),
				// besides the sync period in which the flush must be noticed.
				if i := slices.Index(f.cmd, svcChainOfFlush); i >= 0 {
					f.cmd = slices.Clone(f.cmd)
					f.cmd[i] = serviceChain(t, w.nodes[0].ns, mode, flushServiceIP)
				}
				fullSync := kp.fullSyncTime()
				start := time.Now()
				if out, err := nsExec(w.nodes[0].ns, f.cmd[0], f.cmd[1:]...); err != nil {
					t.Fatalf("%s: %v\n%s", f.name, err, out)
				}
				// The flush must have broken something, or the repair proves nothing;
				// a repair quicker than this check is possible but unlikely.
				if ok, _ := working(); ok {
					t.Logf("%s: both Services still worked right after the flush (repaired already?)", f.name)
				}
				limit := syncPeriod + fullSync + repairSlack(t)
				// On failure the mode's cleanup prints kube-proxy's log.
				eventually(t, f.name+" to be repaired", limit-time.Since(start), working)
				took := time.Since(start)
				figure(t, "mode=%s external flush (%s): both Services worked again after %v (sync period %v, full sync %v)",
					mode, f.name, took.Round(time.Millisecond), syncPeriod, fullSync.Round(time.Millisecond))
			})
		}
	})
}

// changeSlack is what the datapath cases allow beyond one sync period for a manifest
// edit to reach the rules: 2 s on a real machine, times slackScale in the emulated guest,
// where one partial sync of ipvs mode (execs of ipset and iptables-restore) took 1-6 s
// under TCG on a loaded host. (A change no longer waits behind the periodic drift check,
// which once held it 2-8 s there: see syncshell's driftBeforeSync.)
func changeSlack(t *testing.T) time.Duration {
	return time.Duration(float64(2*time.Second) * slackScale(t))
}

// replyTimeout is how long a UDP or SCTP request waits for the echo pod's answer: 2 s
// on a real machine, times slackScale in the emulated guest, where an answer over an
// established SCTP association once took longer than 2 s while the host compiled
// beside the guest. What these requests check is who answers, not how fast.
func replyTimeout(t *testing.T) time.Duration {
	return time.Duration(float64(2*time.Second) * slackScale(t))
}
