//go:build linux

package nftables

import (
	"context"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

// fullDump syncs svcs from scratch into a fresh fake and returns its dump:
// the reference that incremental syncs must converge to.
func fullDump(t *testing.T, tf testFamily, mutate func(*syncerConfig), svcs []tsvc) string {
	t.Helper()
	s, fake := newTestSyncer(t, tf, mutate)
	if _, err := s.sync(context.Background(), syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
		t.Fatalf("reference sync: %v", err)
	}
	return sortedDump(fake.Fake)
}

// sortedDump is what the fake's table means, in a form that does not depend
// on history: lines sorted (element order depends on insertion order, which
// differs between incremental and full syncs but has no meaning in nftables),
// and endpoint map slots resolved into the rules that read them (which slots
// a chain got depends on what was allocated and freed before). Endpoint map
// elements no rule reads are listed as leaked.
func sortedDump(f *knftables.Fake) string {
	slotRef := regexp.MustCompile(`numgen random mod (\d+) offset (\d+) map @(\S+)$`)
	epElem := regexp.MustCompile(`^add element \S+ kube-proxy (` + endpointMapPrefix + `\S+) \{ (\d+) : (.*) \}$`)
	slots := map[string]string{}
	var lines, rules []string
	for _, line := range strings.Split(strings.TrimSpace(f.Dump()), "\n") {
		if m := epElem.FindStringSubmatch(line); m != nil {
			slots[m[1]+"/"+m[2]] = m[3]
			continue
		}
		if strings.HasPrefix(line, "add map ") && strings.Contains(line, " "+endpointMapPrefix) {
			continue
		}
		rules = append(rules, line)
	}
	for _, line := range rules {
		if m := slotRef.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			base, _ := strconv.Atoi(m[2])
			var eps []string
			for i := range n {
				key := m[3] + "/" + strconv.Itoa(base+i)
				ep, ok := slots[key]
				if !ok {
					ep = "<missing>"
				}
				delete(slots, key)
				eps = append(eps, strconv.Itoa(i)+" : "+ep)
			}
			line = line[:len(line)-len(m[0])] + "numgen random mod " + m[1] + " map { " + strings.Join(eps, " , ") + " }"
		}
		lines = append(lines, line)
	}
	for key, ep := range slots {
		lines = append(lines, "leaked endpoint slot "+key+" : "+ep)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

func ownerOf(s tsvc) string {
	o := s.ns + "/" + s.name
	if s.portName != "" {
		o += ":" + s.portName
	}
	return o
}

func TestPartialSyncTouchesOnlyChanges(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			ctx := context.Background()
			s, fake := newTestSyncer(t, tf, nil)
			svcs := append([]tsvc(nil), testServices...)
			if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
				t.Fatal(err)
			}
			runs, lists := fake.runs.Load(), fake.lists.Load()

			// A sync with nothing to do makes no kernel call at all.
			if res, err := s.sync(ctx, syncInput{}); err != nil || res.ops != 0 {
				t.Fatalf("no-op sync: %+v %v", res, err)
			}
			// Re-syncing an unchanged service is also free.
			if res, err := s.sync(ctx, syncInput{services: models(tf.ip, svcs[1])}); err != nil || res.ops != 0 {
				t.Fatalf("unchanged service: %+v %v", res, err)
			}
			if fake.runs.Load() != runs || fake.lists.Load() != lists {
				t.Fatalf("no-op syncs reached the kernel: runs %d->%d lists %d->%d", runs, fake.runs.Load(), lists, fake.lists.Load())
			}

			// One endpoint of svc2 replaced (a pod restarted elsewhere): only
			// its endpoint map slot is rewritten; no rule changes, so the
			// kernel has no ruleset to re-validate. Nothing is listed.
			svcs[1].eps = []tep{svcs[1].eps[0], {ip: "10.180.9.2", port: 80}}
			res, err := s.sync(ctx, syncInput{services: models(tf.ip, svcs[1])})
			if err != nil {
				t.Fatal(err)
			}
			if fake.lists.Load() != lists {
				t.Errorf("partial sync listed the kernel")
			}
			if res.ops != 2 || res.transactions != 1 || strings.Contains(fake.LastTransaction.String(), " rule ") {
				t.Errorf("endpoint change: want 2 element ops (delete, add) in 1 transaction, got %+v:\n%s", res, fake.LastTransaction)
			}
			golden(t, "partial-endpoint-change-"+string(tf.family)+".nft", fake.LastTransaction.String())
			runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, []flowCase{
				{name: "replaced endpoint", src: "10.1.2.3", dst: "172.30.0.42", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.2:80", "10.180.9.2:80"}},
			})
			if diff := cmp.Diff(fullDump(t, tf, nil, svcs), sortedDump(fake.Fake)); diff != "" {
				t.Errorf("incremental result differs from a full sync (-full +incremental):\n%s", diff)
			}

			// One endpoint removed: the chain's one rule is rewritten (the
			// endpoint count changed) and the freed slot deleted after it.
			svcs[1].eps = svcs[1].eps[:1]
			res, err = s.sync(ctx, syncInput{services: models(tf.ip, svcs[1])})
			if err != nil {
				t.Fatal(err)
			}
			if res.ops != 4 || res.transactions != 1 {
				t.Errorf("endpoint removal: want 4 ops (add, flush, rule, delete element) in 1 transaction, got %+v:\n%s", res, fake.LastTransaction)
			}
			golden(t, "partial-endpoint-removal-"+string(tf.family)+".nft", fake.LastTransaction.String())
			runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, []flowCase{
				{name: "updated endpoints", src: "10.1.2.3", dst: "172.30.0.42", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.2:80"}},
			})
			if diff := cmp.Diff(fullDump(t, tf, nil, svcs), sortedDump(fake.Fake)); diff != "" {
				t.Errorf("incremental result differs from a full sync (-full +incremental):\n%s", diff)
			}
		})
	}
}

// TestIncrementalEqualsFull applies random changes with partial syncs and
// checks after each step that the table equals a from-scratch full sync
// (once stale chains are deleted), and that packets behave the same.
func TestIncrementalEqualsFull(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(1, uint64(len(tf.family))))
			s, fake := newTestSyncer(t, tf, nil)
			svcs := map[string]tsvc{}
			for _, sv := range testServices {
				svcs[ownerOf(sv)] = sv
			}
			list := func() []tsvc {
				var out []tsvc
				for _, k := range sortedKeys(svcs) {
					out = append(out, svcs[k])
				}
				return out
			}
			if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, list()...)}); err != nil {
				t.Fatal(err)
			}
			for step := range 60 {
				keys := sortedKeys(svcs)
				var in syncInput
				switch k := keys[rng.IntN(len(keys))]; rng.IntN(6) {
				case 0: // delete a service port
					delete(svcs, k)
					in.removed = append(in.removed, k)
				case 1: // add a service port
					n := strconv.Itoa(step)
					sv := tsvc{ns: "nsr", name: "r" + n, portName: "p", clusterIP: "172.30.1." + n, port: 80 + step,
						nodePort: 31000 + step, affinitySeconds: rng.IntN(2) * 60, extLocal: rng.IntN(2) == 0,
						eps: []tep{{ip: "10.180.3." + n, port: 80, local: rng.IntN(2) == 0}}}
					svcs[ownerOf(sv)] = sv
					in.services = append(in.services, sv.model(tf.ip))
				case 2: // drop all endpoints
					sv := svcs[k]
					sv.eps = nil
					svcs[k] = sv
					in.services = append(in.services, sv.model(tf.ip))
				case 3: // add an endpoint
					sv := svcs[k]
					sv.eps = append(append([]tep(nil), sv.eps...), tep{ip: "10.180.4." + strconv.Itoa(step), port: 80, local: rng.IntN(2) == 0})
					svcs[k] = sv
					in.services = append(in.services, sv.model(tf.ip))
				case 4: // toggle affinity
					sv := svcs[k]
					if sv.affinitySeconds == 0 {
						sv.affinitySeconds = 30
					} else {
						sv.affinitySeconds = 0
					}
					svcs[k] = sv
					in.services = append(in.services, sv.model(tf.ip))
				case 5: // toggle external policy
					sv := svcs[k]
					sv.extLocal = !sv.extLocal
					svcs[k] = sv
					in.services = append(in.services, sv.model(tf.ip))
				}
				if _, err := s.sync(ctx, in); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if err := s.deleteStaleChains(ctx, time.Now(), 0); err != nil {
					t.Fatalf("step %d: deleting stale chains: %v", step, err)
				}
				if diff := cmp.Diff(fullDump(t, tf, nil, list()), sortedDump(fake.Fake)); diff != "" {
					t.Fatalf("step %d: incremental differs from full (-full +incremental):\n%s", step, diff)
				}
			}
		})
	}
}

func TestFailedTransactionKeepsRulesAndNextFullSyncRepairs(t *testing.T) {
	tf := families[0]
	ctx := context.Background()
	s, fake := newTestSyncer(t, tf, nil)
	svcs := append([]tsvc(nil), testServices...)
	if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
		t.Fatal(err)
	}
	before := fake.Dump()

	svcs[0].eps = []tep{{ip: "10.180.9.9", port: 80}}
	fake.failNext.Store(true)
	if _, err := s.sync(ctx, syncInput{services: models(tf.ip, svcs[0])}); err == nil {
		t.Fatal("expected the injected failure")
	}
	if diff := cmp.Diff(before, fake.Dump()); diff != "" {
		t.Fatalf("failed transaction changed the ruleset:\n%s", diff)
	}

	// Someone else also damaged our table meanwhile; the full sync re-reads
	// the kernel and fixes both.
	tx := fake.NewTransaction()
	tx.Flush(&knftables.Map{Name: serviceIPsMap})
	if err := fake.Fake.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fullDump(t, tf, nil, svcs), sortedDump(fake.Fake)); diff != "" {
		t.Errorf("full sync did not repair (-want +got):\n%s", diff)
	}
}

func TestChunkedTransactionsConverge(t *testing.T) {
	for _, maxOps := range []int{1, 7, 50} {
		tf := families[0]
		s, fake := newTestSyncer(t, tf, func(c *syncerConfig) { c.maxOps = maxOps })
		res, err := s.sync(context.Background(), syncInput{full: true, services: models(tf.ip, testServices...)})
		if err != nil {
			t.Fatalf("maxOps=%d: %v", maxOps, err)
		}
		if res.transactions < 2 {
			t.Errorf("maxOps=%d: expected several transactions, got %+v", maxOps, res)
		}
		if diff := cmp.Diff(fullDump(t, tf, nil, testServices), sortedDump(fake.Fake)); diff != "" {
			t.Errorf("maxOps=%d: chunked result differs:\n%s", maxOps, diff)
		}
	}
}
