//go:build linux

package ipvs

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"k8s.io/kube-proxy/pkg/proxy/util/jumprules"
	utilipset "k8s.io/net-utils/ipset"
	utiliptables "k8s.io/net-utils/iptables"
)

// callLogIPTables passes everything through and logs the calls that run
// an iptables binary on a real node, one word each: "save:TABLE",
// "restore" (with its input kept), "ensure-chain", "ensure-rule" and the
// other single-rule or single-chain calls.
type callLogIPTables struct {
	utiliptables.Interface
	calls    []string
	restores [][]byte
}

func (c *callLogIPTables) log(call string) { c.calls = append(c.calls, call) }

func (c *callLogIPTables) EnsureChain(table utiliptables.Table, chain utiliptables.Chain) (bool, error) {
	c.log("ensure-chain")
	return c.Interface.EnsureChain(table, chain)
}

func (c *callLogIPTables) EnsureRule(pos utiliptables.RulePosition, table utiliptables.Table, chain utiliptables.Chain, args ...string) (bool, error) {
	c.log("ensure-rule")
	return c.Interface.EnsureRule(pos, table, chain, args...)
}

func (c *callLogIPTables) DeleteRule(table utiliptables.Table, chain utiliptables.Chain, args ...string) error {
	c.log("delete-rule")
	return c.Interface.DeleteRule(table, chain, args...)
}

func (c *callLogIPTables) FlushChain(table utiliptables.Table, chain utiliptables.Chain) error {
	c.log("flush-chain")
	return c.Interface.FlushChain(table, chain)
}

func (c *callLogIPTables) DeleteChain(table utiliptables.Table, chain utiliptables.Chain) error {
	c.log("delete-chain")
	return c.Interface.DeleteChain(table, chain)
}

func (c *callLogIPTables) ChainExists(table utiliptables.Table, chain utiliptables.Chain) (bool, error) {
	c.log("chain-exists")
	return c.Interface.ChainExists(table, chain)
}

func (c *callLogIPTables) SaveInto(table utiliptables.Table, buf *bytes.Buffer) error {
	c.log("save:" + string(table))
	return c.Interface.SaveInto(table, buf)
}

func (c *callLogIPTables) Restore(table utiliptables.Table, data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	c.log("restore")
	c.restores = append(c.restores, bytes.Clone(data))
	return c.Interface.Restore(table, data, flush, counters)
}

func (c *callLogIPTables) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	c.log("restore")
	c.restores = append(c.restores, bytes.Clone(data))
	return c.Interface.RestoreAll(data, flush, counters)
}

// jumpTestService is a NodePort Service with one local endpoint, so that
// the nat and filter tables hold rules of ours besides the jumps.
func jumpTestService(ipv6 bool) (*v1.Service, *discovery.EndpointSlice) {
	clusterIP, podIP, at := "172.30.0.41", "10.180.0.1", discovery.AddressTypeIPv4
	if ipv6 {
		clusterIP, podIP, at = "fd00:172:30::41", "fd00:10:180::1", discovery.AddressTypeIPv6
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "svc1"},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeNodePort, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []v1.ServicePort{{Name: "p80", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30080, TargetPort: intstr.FromInt32(80)}},
		},
	}
	slice := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "svc1-1",
			Labels: map[string]string{discovery.LabelServiceName: "svc1"}},
		AddressType: at,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("p80"), Port: ptr.To[int32](80), Protocol: ptr.To(v1.ProtocolTCP)}},
		Endpoints: []discovery.Endpoint{{Addresses: []string{podIP}, NodeName: ptr.To(testHostname),
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true)}}},
	}
	return svc, slice
}

// savedTables returns the fake's filter and nat tables as one
// iptables-restore input.
func savedTables(t *testing.T, ipt utiliptables.Interface) string {
	t.Helper()
	var b bytes.Buffer
	for _, table := range []utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
		must(t, ipt.SaveInto(table, &b))
	}
	return b.String()
}

// countJump counts the rules in save that are jc as linkChains writes it.
func countJump(save string, jc jumprules.Jump) int {
	want := fmt.Sprintf("-A %s -m comment --comment %q -j %s", jc.Src, jc.Comment, jc.Dst)
	n, table := 0, ""
	for _, line := range strings.Split(save, "\n") {
		if t, ok := strings.CutPrefix(line, "*"); ok {
			table = t
		}
		if table == string(jc.Table) && line == want {
			n++
		}
	}
	return n
}

// sortedLines returns save's lines sorted: chains that a restore created
// with "-N" are declared after the built-in ones, not in the order of a
// complete restore.
func sortedLines(save string) string {
	lines := strings.Split(save, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// A full sync on a node that already has every chain and jump (a restarted
// kube-proxy adopting its predecessor's rules) reads the two tables and
// restores its rules: no Ensure call, each of which is an iptables exec
// (1-3 s each on a loaded TCG guest, which held the first sync for over a
// minute). What is missing is added in one restore before the rules
// restore, chains that no jump leads to with "-N" only.
func TestLinkChainsOneRestore(t *testing.T) {
	// without drops the listed lines (regexps) from a complete node's
	// tables.
	without := func(patterns ...string) func(string) string {
		return func(save string) string {
			var out []string
			for _, line := range strings.Split(save, "\n") {
				drop := false
				for _, p := range patterns {
					drop = drop || regexp.MustCompile(p).MatchString(line)
				}
				if !drop {
					out = append(out, line)
				}
			}
			return strings.Join(out, "\n")
		}
	}
	everything := func(save string) string { return save }
	cases := []struct {
		name string
		// node is what the node holds before the sync, from a complete
		// node's tables; nil: nothing.
		node func(string) string
		// wantJumpRestore is the restore before the rules restore; ""
		// means none.
		wantJumpRestore string
		// others is a rule of someone else's that must stay.
		others string
	}{{
		name: "every chain and jump present",
		node: everything,
	}, {
		name: "empty node",
		node: nil,
		wantJumpRestore: "*filter\n" +
			"-N KUBE-FORWARD\n-N KUBE-NODE-PORT\n-N KUBE-PROXY-FIREWALL\n-N KUBE-SOURCE-RANGES-FIREWALL\n-N KUBE-IPVS-FILTER\n-N KUBE-IPVS-OUT-FILTER\n" +
			"-I FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD\n" +
			"-I INPUT -m comment --comment \"kubernetes health check rules\" -j KUBE-NODE-PORT\n" +
			"-I INPUT -m comment --comment \"kube-proxy firewall rules\" -j KUBE-PROXY-FIREWALL\n" +
			"-I FORWARD -m comment --comment \"kube-proxy firewall rules\" -j KUBE-PROXY-FIREWALL\n" +
			"-I INPUT -m comment --comment \"kubernetes ipvs access filter\" -j KUBE-IPVS-FILTER\n" +
			"-I OUTPUT -m comment --comment \"kubernetes ipvs access filter\" -j KUBE-IPVS-OUT-FILTER\n" +
			"COMMIT\n*nat\n" +
			"-N KUBE-SERVICES\n-N KUBE-POSTROUTING\n-N KUBE-NODE-PORT\n-N KUBE-LOAD-BALANCER\n-N KUBE-MARK-MASQ\n" +
			"-I OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n" +
			"-I PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n" +
			"-I POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING\n" +
			"COMMIT\n",
	}, {
		name:            "one jump missing",
		node:            without(`^-A PREROUTING .*-j KUBE-SERVICES$`),
		wantJumpRestore: "*nat\n-I PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\nCOMMIT\n",
	}, {
		// A jump with another comment is someone else's: ours is added.
		name: "jump with another comment",
		node: func(s string) string {
			return strings.Replace(s, `"kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER`, `"not ours" -j KUBE-IPVS-OUT-FILTER`, 1)
		},
		wantJumpRestore: "*filter\n-I OUTPUT -m comment --comment \"kubernetes ipvs access filter\" -j KUBE-IPVS-OUT-FILTER\nCOMMIT\n",
		others:          `-A OUTPUT -m comment --comment "not ours" -j KUBE-IPVS-OUT-FILTER`,
	}, {
		name:            "a chain no jump leads to missing",
		node:            without(`^:KUBE-SOURCE-RANGES-FIREWALL `, `^-A KUBE-SOURCE-RANGES-FIREWALL `),
		wantJumpRestore: "*filter\n-N KUBE-SOURCE-RANGES-FIREWALL\nCOMMIT\n",
	}, {
		name: "a jump's target chain and its jump missing",
		node: without(`^:KUBE-IPVS-OUT-FILTER `, `^-A KUBE-IPVS-OUT-FILTER `, `-j KUBE-IPVS-OUT-FILTER$`),
		wantJumpRestore: "*filter\n-N KUBE-IPVS-OUT-FILTER\n" +
			"-I OUTPUT -m comment --comment \"kubernetes ipvs access filter\" -j KUBE-IPVS-OUT-FILTER\nCOMMIT\n",
	}}
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		nodeIP := "192.168.0.2"
		if family == v1.IPv6Protocol {
			nodeIP = "fd00:192::2"
		}
		// complete is the tables of a node a proxier has synced.
		first, firstEnv := newFakeProxier(t, family, []string{nodeIP}, fakeProxierOptions{})
		svc, slice := jumpTestService(family == v1.IPv6Protocol)
		first.OnServiceAdd(svc)
		first.OnEndpointSliceAdd(slice)
		syncAll(t, first)
		complete := savedTables(t, firstEnv.ipt)

		for _, tc := range cases {
			t.Run(string(family)+"/"+tc.name, func(t *testing.T) {
				p, env := newFakeProxier(t, family, []string{nodeIP}, fakeProxierOptions{})
				if tc.node != nil {
					must(t, env.ipt.RestoreAll([]byte(tc.node(complete)), utiliptables.FlushTables, utiliptables.NoRestoreCounters))
				}
				ipt := &callLogIPTables{Interface: p.ipt}
				p.ipt = ipt
				svc, slice := jumpTestService(family == v1.IPv6Protocol)
				p.OnServiceAdd(svc)
				p.OnEndpointSliceAdd(slice)
				syncAll(t, p)

				want := []string{"save:filter", "save:nat", "restore"}
				if tc.wantJumpRestore != "" {
					want = []string{"save:filter", "save:nat", "restore", "restore"}
				}
				if got := strings.Join(ipt.calls, " "); got != strings.Join(want, " ") {
					t.Errorf("the first (full) sync's iptables calls:\n  %s\nwant\n  %s", got, strings.Join(want, " "))
				}
				if tc.wantJumpRestore != "" && len(ipt.restores) == 2 {
					if got := string(ipt.restores[0]); got != tc.wantJumpRestore {
						t.Errorf("jump restore:\n%s\nwant:\n%s", got, tc.wantJumpRestore)
					}
				}
				// Whatever the node held, it now holds every jump once
				// and the same tables as the node that synced first.
				got := savedTables(t, env.ipt)
				for _, jc := range iptablesJumpChains {
					if n := countJump(got, jc); n != 1 {
						t.Errorf("%s/%s -> %s: %d jump rules, want 1", jc.Table, jc.Src, jc.Dst, n)
					}
				}
				if tc.others != "" && !strings.Contains(got, tc.others+"\n") {
					t.Errorf("someone else's rule %q is gone:\n%s", tc.others, got)
				}
				if tc.node != nil && tc.others == "" && sortedLines(got) != sortedLines(complete) {
					t.Errorf("tables after the sync:\n%s\nwant those of the node that synced first:\n%s", got, complete)
				}
			})
		}
	}
}

// With the real iptables binaries (nft and legacy), a cold start adds the
// chains and jumps in one restore the kernel accepts (no fallback to
// Ensure calls), and a restarted proxier on the same node adopts them with
// the two saves and its rules restore.
func TestKernelLinkChainsOneRestore(t *testing.T) {
	f := fams[0]
	for _, variant := range []string{"nft", "legacy"} {
		t.Run(variant, func(t *testing.T) {
			kernelNetns(t, variant)
			real := utiliptables.New(utiliptables.ProtocolIPv4)
			if err := real.Present(); err != nil {
				t.Skipf("%s iptables not usable here: %v", variant, err)
			}
			ips := utilipset.New()
			if _, err := ips.GetVersion(); err != nil {
				t.Skipf("ipset not usable here: %v", err)
			}
			for _, stage := range []struct {
				name string
				want string
			}{
				{"cold start", "save:filter save:nat restore restore"},
				{"restart", "save:filter save:nat restore"},
			} {
				ipt := &callLogIPTables{Interface: real}
				p, _ := kernelProxier(t, f, ipt, ips)
				svc, slice := jumpTestService(false)
				p.OnServiceAdd(svc)
				p.OnEndpointSliceAdd(slice)
				syncAll(t, p)
				if got := strings.Join(ipt.calls, " "); got != stage.want {
					t.Errorf("%s: iptables calls %q, want %q", stage.name, got, stage.want)
				}
				save := savedTables(t, real)
				for _, jc := range iptablesJumpChains {
					if n := countJump(save, jc); n != 1 {
						t.Errorf("%s: %s/%s -> %s: %d jump rules, want 1:\n%s", stage.name, jc.Table, jc.Src, jc.Dst, n, save)
					}
				}
			}
		})
	}
}
