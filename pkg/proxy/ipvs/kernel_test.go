//go:build linux

package ipvs

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	ipvstesting "k8s.io/kube-proxy/pkg/proxy/ipvs/testing"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	proxyutiltest "k8s.io/kube-proxy/pkg/proxy/util/testing"
	utilipset "k8s.io/net-utils/ipset"
	ipsettest "k8s.io/net-utils/ipset/testing"
	utiliptables "k8s.io/net-utils/iptables"
	iptablestest "k8s.io/net-utils/iptables/testing"
	utilipvs "k8s.io/net-utils/ipvs"
	ipvstest "k8s.io/net-utils/ipvs/testing"
	sysctltest "k8s.io/net-utils/sysctl/testing"
)

// kernelNetns creates a private network namespace and puts wrappers first
// in PATH so that the ipset and iptables binaries the real implementations
// run execute inside it. The host namespace is never touched.
func kernelNetns(t *testing.T, variant string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kernel test needs root (creates a network namespace, loads ip sets and iptables rules)")
	}
	for _, bin := range []string{"ip", "ipset", "iptables-" + variant, "ip6tables-" + variant, "iptables-" + variant + "-save", "iptables-" + variant + "-restore"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("kernel test needs %s: %v", bin, err)
		}
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	ns := "kp-ipvs-" + hex.EncodeToString(rnd[:])
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("cannot create network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("deleting netns %s: %v: %s", ns, err, out)
		}
	})
	dir := t.TempDir()
	write := func(name, target string) {
		script := fmt.Sprintf("#!/bin/sh\nexec ip netns exec %s %s \"$@\"\n", ns, target)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ipsetPath, _ := exec.LookPath("ipset")
	write("ipset", ipsetPath)
	for _, fam := range []string{"iptables", "ip6tables"} {
		for _, suffix := range []string{"", "-save", "-restore"} {
			write(fam+suffix, fam+"-"+variant+suffix)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// corruptingIPTables makes every restore fail while bad is set, by
// appending a jump to a chain that does not exist.
type corruptingIPTables struct {
	utiliptables.Interface
	bad bool
}

func (c *corruptingIPTables) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	if c.bad {
		i := bytes.Index(data, []byte("COMMIT\n")) // the nat table, written first
		data = append(append(slices.Clone(data[:i]), "-A KUBE-SERVICES -j KUBE-NO-SUCH-CHAIN\n"...), data[i:]...)
	}
	return c.Interface.RestoreAll(data, flush, counters)
}

// kernelProxier is a proxier of family programming the namespace's ip sets
// and iptables, with fake IPVS and netlink (this kernel may have neither
// IPVS nor dummy links).
func kernelProxier(t *testing.T, f fam, ipt utiliptables.Interface, ips utilipset.Interface) (*Proxier, *fakeEnv) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	env := &fakeEnv{ipvs: ipvstest.NewFake(), netlink: ipvstesting.NewFakeNetlinkHandle(f.ipv6), sysctl: sysctltest.NewFake(), ctx: ctx}
	_ = env.netlink.SetLocalAddresses("eth0", f.node)
	config := &kubeproxyconfig.KubeProxyConfiguration{}
	config.IPTables.MasqueradeBit = ptr.To[int32](14)
	config.SyncPeriod = metav1.Duration{Duration: 30e9}
	p, err := NewProxierWithOptions(ctx, config, f.family, ipt, env.ipvs, ips, env.sysctl, proxyutil.NewDetectLocalByCIDR(f.clusterCIDR),
		testHostname, net.ParseIP(f.node), nil, nil, false, withDeps(deps{
			netlink: env.netlink, conntrack: conntrack.NewFake(),
			HostOptions: syncshell.HostOptions{ServiceHealthServer: healthcheck.NewFakeServiceHealthServer(),
				NetworkInterfacer: proxyutiltest.NewFakeNetwork()},
			kernelVersion:  func() (*version.Version, error) { return version.MustParseGeneric("6.1"), nil },
			noGracefulLoop: true,
		}))
	if err != nil {
		t.Fatal(err)
	}
	return p, env
}

// readBack returns an env whose iptables and ipset fakes hold what the
// kernel holds (parsed from iptables-save and ipset list), with the
// proxier's IPVS and netlink fakes, for the tracer.
func readBack(t *testing.T, p *Proxier, env *fakeEnv, ipt utiliptables.Interface, ips utilipset.Interface) (*fakeEnv, string) {
	t.Helper()
	var save bytes.Buffer
	for _, table := range []utiliptables.Table{utiliptables.TableNAT, utiliptables.TableFilter} {
		if err := ipt.SaveInto(table, &save); err != nil {
			t.Fatalf("iptables-save %s: %v", table, err)
		}
	}
	out := *env
	if p.ipFamily == v1.IPv6Protocol {
		out.ipt = iptablestest.NewIPv6Fake()
	} else {
		out.ipt = iptablestest.NewFake()
	}
	if err := out.ipt.RestoreAll(save.Bytes(), utiliptables.FlushTables, utiliptables.RestoreCounters); err != nil {
		t.Fatalf("loading the kernel's rules into the fake: %v\n%s", err, save.String())
	}
	out.ipset = ipsettest.NewFake("v7.17")
	names, err := ips.ListSets()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		id := p.setID(n)
		if id < 0 {
			t.Errorf("unexpected set %s in the namespace", n)
			continue
		}
		spec := p.sets[id].IPSet
		if err := out.ipset.CreateSet(&spec, false); err != nil {
			t.Fatal(err)
		}
		entries, err := ips.ListEntries(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := out.ipset.AddEntry(e, &spec, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	return &out, save.String()
}

func TestKernel(t *testing.T) {
	for _, variant := range []string{"nft", "legacy"} {
		for _, f := range fams {
			if variant == "legacy" && f.ipv6 {
				// Legacy ip6tables adds little over the other three, and
				// each case costs seconds of iptables and ipset runs.
				continue
			}
			t.Run(variant+"/"+string(f.family), func(t *testing.T) {
				kernelNetns(t, variant)
				proto := utiliptables.ProtocolIPv4
				if f.ipv6 {
					proto = utiliptables.ProtocolIPv6
				}
				real := utiliptables.New(proto)
				if err := real.Present(); err != nil {
					t.Skipf("%s iptables not usable here: %v", variant, err)
				}
				ips := utilipset.New()
				if _, err := ips.GetVersion(); err != nil {
					t.Skipf("ipset not usable here: %v", err)
				}
				ipt := &corruptingIPTables{Interface: real}
				p, env := kernelProxier(t, f, ipt, ips)

				// KUBE-IPVS-OUT-FILTER's "-m ipvs" rules (a load balancer whose
				// source ranges leave the node out) need the kernel's IPVS;
				// without it the ranges hold the node, so no such rule is made.
				ranges, fromNodeWant := []string{f.srcRange}, "drop"
				if err := utilipvs.Available(); err != nil {
					t.Logf("no IPVS in this kernel, so no -m ipvs rules are loaded: %v", err)
					ranges, fromNodeWant = []string{f.srcRange, f.nodeRange}, "ipvs "+f.hp(f.pod(1), 8080)+","+f.hp(f.rpod(1), 8080)+" masq=all"
				}
				lb := lbService(f, func(s *v1.Service) {
					s.Spec.LoadBalancerSourceRanges = ranges
					s.Spec.ExternalIPs = []string{f.extIP}
				})
				slice := webSlice(f, v1.ProtocolTCP, local(f.pod(1)), st.EP{IP: f.rpod(1)})
				dns := st.NewService("ns", "dns", func(s *v1.Service) {
					s.Spec.ClusterIP = f.svc(2)
					s.Spec.Type = v1.ServiceTypeNodePort
					s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
					s.Spec.Ports = []v1.ServicePort{st.ServicePort("dns", 53, v1.ProtocolUDP, 30053)}
				})
				dnsSlice := st.Slice("ns", "dns", "dns-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("dns", 5353, v1.ProtocolUDP)}, local(f.pod(3)))
				p.OnServiceAdd(lb)
				p.OnEndpointSliceAdd(slice)
				syncAll(t, p)

				both := f.hp(f.pod(1), 8080) + "," + f.hp(f.rpod(1), 8080)
				check := func(stage string, probes []probe) string {
					t.Helper()
					kenv, save := readBack(t, p, env, real, ips)
					tr := newTracer(t, kenv)
					for _, pr := range probes {
						if got := tr.trace(pr.pkt).String(); got != pr.want {
							t.Errorf("%s: %s: got %s, want %s", stage, pr.name, got, pr.want)
						}
					}
					return save
				}
				tcp := func(from origin, src, dst string, port int) packet {
					return packet{from: from, src: src, dst: dst, proto: "tcp", dport: port}
				}
				check("full sync", []probe{
					{"cluster IP", tcp(fromPod, f.pod(2), f.svc(1), 80), "ipvs " + both},
					{"hairpin", tcp(fromPod, f.pod(1), f.svc(1), 80), "ipvs " + both + " masq=" + f.hp(f.pod(1), 8080)},
					{"LB allowed", tcp(fromExternal, f.external, f.lb, 80), "ipvs " + both + " masq=all"},
					{"LB refused", tcp(fromExternal, f.pod(9), f.lb, 80), "drop"},
					{"LB from the node", tcp(fromNode, f.lb, f.lb, 80), fromNodeWant},
					{"external IP", tcp(fromExternal, f.external, f.extIP, 80), "ipvs " + both + " masq=all"},
					{"node port", tcp(fromExternal, f.external, f.node, 30080), "ipvs " + both + " masq=all"},
					{"VIP other port", tcp(fromExternal, f.external, f.svc(1), 22), "reject"},
				})

				// Partial sync: a new UDP service with eTP Local, one endpoint gone.
				p.OnServiceAdd(dns)
				p.OnEndpointSliceAdd(dnsSlice)
				p.OnEndpointSliceUpdate(slice, webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}))
				if err := p.SyncNow(); err != nil {
					t.Fatalf("partial sync: %v", err)
				}
				good := check("partial sync", []probe{
					{"cluster IP", tcp(fromPod, f.pod(2), f.svc(1), 80), "ipvs " + f.hp(f.rpod(1), 8080)},
					{"old hairpin entry gone", tcp(fromPod, f.pod(1), f.svc(1), 80), "ipvs " + f.hp(f.rpod(1), 8080)},
					{"udp node port, eTP Local", packet{fromExternal, f.external, f.node, "udp", 30053}, "ipvs " + f.hp(f.pod(3), 5353)},
				})

				// A failing restore leaves the previous rules in place.
				ipt.bad = true
				p.OnServiceDelete(dns)
				if err := p.SyncNow(); err == nil {
					t.Fatal("sync with a corrupt restore succeeded")
				}
				_, after := readBack(t, p, env, real, ips)
				if normalizeSave(after) != normalizeSave(good) {
					t.Errorf("failed restore changed the rules:\nbefore:\n%s\nafter:\n%s", good, after)
				}
				ipt.bad = false
				if err := p.SyncNow(); err != nil {
					t.Fatalf("sync after the failure: %v", err)
				}
				check("recovered", []probe{
					{"udp node port gone", packet{fromExternal, f.external, f.node, "udp", 30053}, "host"},
					{"cluster IP", tcp(fromPod, f.pod(2), f.svc(1), 80), "ipvs " + f.hp(f.rpod(1), 8080)},
				})
				if entries, _ := ips.ListEntries(p.sets[setNodePortLocalUDP].Name); len(entries) != 0 {
					t.Errorf("stale entries in %s: %v", p.sets[setNodePortLocalUDP].Name, entries)
				}

				// Cleanup removes the rules before the sets they reference
				// (the kernel refuses to destroy a set in use).
				_, ctx := ktesting.NewTestContext(t)
				if failed := cleanupLeftovers(ctx, env.ipvs, []utiliptables.Interface{real}, ips, env.netlink, nil); failed {
					t.Error("cleanup reported an error")
				}
				var save bytes.Buffer
				for _, table := range []utiliptables.Table{utiliptables.TableNAT, utiliptables.TableFilter} {
					_ = real.SaveInto(table, &save)
				}
				if bytes.Contains(save.Bytes(), []byte("KUBE-")) {
					t.Errorf("rules left after cleanup:\n%s", save.String())
				}
				if names, err := ips.ListSets(); err != nil || len(names) != 0 {
					t.Errorf("sets left after cleanup: %v (%v)", names, err)
				}
			})
		}
	}
}
