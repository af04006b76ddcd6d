//go:build linux

package ipvs

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	netutils "k8s.io/utils/net"

	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	utilipset "k8s.io/net-utils/ipset"
	utiliptables "k8s.io/net-utils/iptables"
	utilipvs "k8s.io/net-utils/ipvs"
)

// Option customizes a Proxier built by NewProxierWithOptions: the options
// every proxier shares (proxieropts.WithDryRun, WithConntrack,
// WithServiceHealthServer, WithNetworkInterfacer, WithSyncHook).
//
// With proxieropts.WithDryRun the proxier touches nothing on the host and
// writes, after every sync that changed something, the whole state it has
// planned: the addresses bound to kube-ipvs0 (as `ip addr add` lines), the
// IPVS table (`ipvsadm-save -n`), the ip sets (`ipset save`) and the
// iptables rules (`iptables-save`), each section under a "# " header line.
// IPVS state is kernel state, not a script, so the caller passes in-memory
// ipt, ipvs and ipset handles (net-utils' fakes) that the sync programs and
// the output is read back from; the kube-ipvs0 interface is kept in memory,
// the host's sysctls and IPVS timeouts are left alone, no conntrack entry is
// cleaned and the per-service health checks are faked. This is what
// `kube-proxy --dry-run --proxy-mode ipvs` uses.
type Option = proxieropts.Option

// dryRunDeps fills in the stand-ins a dry run uses for what NewProxier
// would take from the host.
func dryRunDeps(d *deps, isIPv6 bool) {
	if d.netlink == nil {
		d.netlink = &memNetlink{isIPv6: isIPv6, nw: d.NetworkInterfacer, bound: map[string][]string{}}
	}
	if d.conntrack == nil {
		d.conntrack = conntrack.NewFake()
	}
	// A dry run starts from an empty table: no real server is draining.
	d.noGracefulLoop = true
}

// memNetlink is kube-ipvs0 in memory, over the node's addresses as nw
// lists them, for a dry run.
type memNetlink struct {
	isIPv6 bool
	nw     proxyutil.NetworkInterfacer
	// mu guards the rest: the rules check may read while nothing syncs,
	// from another goroutine than the sync's.
	mu    sync.Mutex
	dummy bool
	bound map[string][]string
}

var _ NetLinkHandle = &memNetlink{}

func (h *memNetlink) EnsureAddressBind(address, devName string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if slices.Contains(h.bound[devName], address) {
		return true, nil
	}
	h.bound[devName] = append(h.bound[devName], address)
	return false, nil
}

func (h *memNetlink) UnbindAddress(address, devName string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bound[devName] = slices.DeleteFunc(h.bound[devName], func(a string) bool { return a == address })
	return nil
}

func (h *memNetlink) EnsureDummyDevice(devName string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	exist := h.dummy
	h.dummy = true
	return exist, nil
}

func (h *memNetlink) DeleteDummyDevice(devName string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dummy = false
	delete(h.bound, devName)
	return nil
}

func (h *memNetlink) ListBindAddress(devName string) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.bound[devName]), nil
}

// valid is the real handle's filter: this family, no loopback, no IPv6
// link-local.
func (h *memNetlink) valid(ip net.IP) bool {
	if h.isIPv6 != netutils.IsIPv6(ip) || ip.IsLoopback() {
		return false
	}
	return !h.isIPv6 || !ip.IsLinkLocalUnicast()
}

func (h *memNetlink) boundSet(skip string) sets.Set[string] {
	out := sets.New[string]()
	for dev, addrs := range h.bound {
		if dev == skip {
			continue
		}
		for _, a := range addrs {
			if ip := netutils.ParseIPSloppy(a); ip != nil && h.valid(ip) {
				out.Insert(ip.String())
			}
		}
	}
	return out
}

func (h *memNetlink) GetAllLocalAddresses() (sets.Set[string], error) {
	return h.GetAllLocalAddressesExcept("")
}

func (h *memNetlink) GetLocalAddresses(dev string) (sets.Set[string], error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := sets.New[string]()
	for _, a := range h.bound[dev] {
		if ip := netutils.ParseIPSloppy(a); ip != nil && h.valid(ip) {
			out.Insert(ip.String())
		}
	}
	return out, nil
}

func (h *memNetlink) GetAllLocalAddressesExcept(dev string) (sets.Set[string], error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.boundSet(dev)
	if h.nw != nil {
		addrs, err := interfaceAddrsExcept(h.nw, dev)
		if err != nil {
			return nil, fmt.Errorf("listing node addresses: %w", err)
		}
		out = out.Union(proxyutil.AddressSet(h.valid, addrs))
	}
	return out, nil
}

// hostInterfaces lists the host's interfaces; a variable so tests can stand
// in a host.
var hostInterfaces = func() ([]hostInterface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]hostInterface, 0, len(ifs))
	for i := range ifs {
		out = append(out, hostInterface{name: ifs[i].Name, addrs: ifs[i].Addrs})
	}
	return out, nil
}

type hostInterface struct {
	name  string
	addrs func() ([]net.Addr, error)
}

// interfaceAddrsExcept lists nw's addresses. When nw reads this host's
// interfaces, those of the interface named dev are left out, as the live
// handle leaves them out: a dry run inside a namespace where kube-proxy
// already runs (kube-proxy trace --netns) finds the real kube-ipvs0
// holding every cluster, external and load-balancer IP, none of which is a
// node address to serve NodePorts on.
func interfaceAddrsExcept(nw proxyutil.NetworkInterfacer, dev string) ([]net.Addr, error) {
	if _, real := nw.(proxyutil.RealNetwork); !real {
		return nw.InterfaceAddrs()
	}
	ifs, err := hostInterfaces()
	if err != nil {
		return nil, err
	}
	var out []net.Addr
	for _, ifc := range ifs {
		if ifc.name == dev {
			continue
		}
		addrs, err := ifc.addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifc.name, err)
		}
		out = append(out, addrs...)
	}
	return out, nil
}

// writePlannedState writes what a dry run's handles hold now (see
// WithDryRun), in one Write, so that each sync is one piece of output.
func (p *Proxier) writePlannedState(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# ip addr: addresses bound to %s\n", defaultDummyDevice)
	bound, err := p.netlink.ListBindAddress(defaultDummyDevice)
	if err != nil {
		return err
	}
	sort.Strings(bound)
	bits := 32
	if p.ipFamily == "IPv6" {
		bits = 128
	}
	for _, a := range bound {
		fmt.Fprintf(&b, "ip addr add %s/%d dev %s\n", a, bits, defaultDummyDevice)
	}

	b.WriteString("# ipvsadm-save -n\n")
	if err := writeIPVSAdmSave(&b, p.ipvs); err != nil {
		return err
	}

	b.WriteString("# ipset save\n")
	for _, set := range p.sets {
		entries, err := p.ipset.ListEntries(set.Name)
		if err != nil {
			// Sets are created on demand; one never created holds nothing.
			continue
		}
		b.WriteString(ipsetCreateLine(&set.IPSet) + "\n")
		sort.Strings(entries)
		for _, e := range entries {
			fmt.Fprintf(&b, "add %s %s\n", set.Name, e)
		}
	}

	b.WriteString("# iptables-save\n")
	for _, table := range []utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
		if err := p.ipt.SaveInto(table, &b); err != nil {
			return fmt.Errorf("reading the planned %s table: %w", table, err)
		}
	}
	_, err = w.Write(b.Bytes())
	return err
}

// ipsetCreateLine is set's "create" line as `ipset save` prints it.
func ipsetCreateLine(set *utilipset.IPSet) string {
	if set.SetType == utilipset.BitmapPort {
		r := set.PortRange
		if r == "" {
			r = utilipset.DefaultPortRange
		}
		return fmt.Sprintf("create %s %s range %s", set.Name, set.SetType, r)
	}
	hashSize, maxElem := set.HashSize, set.MaxElem
	if hashSize <= 0 {
		hashSize = 1024
	}
	if maxElem <= 0 {
		maxElem = 65536
	}
	return fmt.Sprintf("create %s %s family %s hashsize %d maxelem %d", set.Name, set.SetType, set.HashFamily, hashSize, maxElem)
}

// writeIPVSAdmSave writes h's virtual and real servers as
// `ipvsadm-save -n` does: "-A" lines for virtual servers, each followed by
// its real servers' "-a" lines. kube-proxy's real servers are all
// masqueraded (-m).
func writeIPVSAdmSave(b *bytes.Buffer, h utilipvs.Interface) error {
	vss, err := h.GetVirtualServers()
	if err != nil {
		return fmt.Errorf("listing the planned virtual servers: %w", err)
	}
	sort.Slice(vss, func(i, j int) bool { return vss[i].String() < vss[j].String() })
	for _, vs := range vss {
		svc := fmt.Sprintf("%s %s", ipvsadmProtoFlag(vs.Protocol), net.JoinHostPort(vs.Address.String(), fmt.Sprint(vs.Port)))
		line := fmt.Sprintf("-A %s -s %s", svc, vs.Scheduler)
		var schedFlags []string
		if vs.Flags&utilipvs.FlagSourceHash != 0 {
			schedFlags = append(schedFlags, "sh-port")
		}
		if len(schedFlags) > 0 {
			line += " -b " + strings.Join(schedFlags, ",")
		}
		if vs.Flags&utilipvs.FlagPersistent != 0 {
			line += fmt.Sprintf(" -p %d", vs.Timeout)
		}
		b.WriteString(line + "\n")
		rss, err := h.GetRealServers(vs)
		if err != nil {
			return fmt.Errorf("listing the planned real servers of %s: %w", vs, err)
		}
		sort.Slice(rss, func(i, j int) bool { return rss[i].String() < rss[j].String() })
		for _, rs := range rss {
			fmt.Fprintf(b, "-a %s -r %s -m -w %d\n", svc, rs.String(), rs.Weight)
		}
	}
	return nil
}

func ipvsadmProtoFlag(proto string) string {
	switch strings.ToUpper(proto) {
	case "UDP":
		return "-u"
	case "SCTP":
		return "--sctp-service"
	}
	return "-t"
}
