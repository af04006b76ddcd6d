package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"

	v1 "k8s.io/api/core/v1"
	utilipvs "k8s.io/net-utils/ipvs"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// ipvsDummyDevice is the interface the ipvs proxier binds every service
// address to, so the kernel delivers packets to them locally, where IPVS
// takes them.
const ipvsDummyDevice = "kube-ipvs0"

// parseIPVSDryRun reads one family's planned state from an ipvs dry run
// (proxieropts.WithDryRun in ipvs mode): its "# ip addr", "# ipvsadm-save -n", "# ipset save"
// and "# iptables-save" sections.
func parseIPVSDryRun(text string) (*trace.IPVS, error) {
	sections := map[string]*strings.Builder{}
	var cur *strings.Builder
	for _, line := range strings.Split(text, "\n") {
		for _, h := range []string{"# ip addr", "# ipvsadm-save", "# ipset save", "# iptables-save"} {
			if strings.HasPrefix(line, h) {
				cur = &strings.Builder{}
				sections[h] = cur
				line = ""
				break
			}
		}
		if cur != nil && line != "" {
			cur.WriteString(line + "\n")
		}
	}
	for _, h := range []string{"# ip addr", "# ipvsadm-save", "# ipset save", "# iptables-save"} {
		if sections[h] == nil {
			return nil, fmt.Errorf("the ipvs dry run has no %q section", h)
		}
	}
	var bound []netip.Addr
	for _, line := range strings.Split(sections["# ip addr"].String(), "\n") {
		w := strings.Fields(line)
		if len(w) < 4 || w[0] != "ip" || w[1] != "addr" || w[2] != "add" {
			continue
		}
		p, err := netip.ParsePrefix(w[3])
		if err != nil {
			return nil, fmt.Errorf("%q: %w", line, err)
		}
		bound = append(bound, p.Addr())
	}
	vss, err := trace.ParseIPVSAdmSave(sections["# ipvsadm-save"].String())
	if err != nil {
		return nil, fmt.Errorf("ipvsadm-save: %w", err)
	}
	sets, err := trace.ParseIPSets(sections["# ipset save"].String())
	if err != nil {
		return nil, fmt.Errorf("ipset save: %w", err)
	}
	ipt, err := trace.ParseIPTablesSave(sections["# iptables-save"].String())
	if err != nil {
		return nil, fmt.Errorf("iptables-save: %w", err)
	}
	return trace.NewIPVS(ipt, sets, vss, bound)
}

// ipvsTableReader reads a namespace's IPVS table; tests replace it, as
// kernels without IPVS (CI's) cannot hold one.
var ipvsTableReader = readIPVSTable

// readLiveIPVS reads an ipvs-mode node: the IPVS table (first, so that a
// kernel without IPVS is named as the reason), the family's iptables rules
// (from the backend iptables mode would read: --iptables-backend, or the
// one kube-proxy in the namespace would pick, as kube-proxy in ipvs mode
// programs its iptables rules there too), the ip sets, and the addresses on
// kube-ipvs0; and the node's bridges, which -m physdev rules tell apart. It
// also says what it read, for the answer's Read: line.
func (to *traceOptions) readLiveIPVS(ctx context.Context, fs *pflag.FlagSet, family v1.IPFamily) (*trace.IPVS, []string, string, error) {
	netns := to.netns
	vss, err := ipvsTableReader(netns)
	if err != nil {
		return nil, nil, "", fmt.Errorf("reading the IPVS table: %w", err)
	}
	save, read, err := to.readLiveText(ctx, fs, string(kubeproxyconfig.ProxyModeIPTables), family)
	if err != nil {
		return nil, nil, "", err
	}
	read += "; ipset save, the IPVS table and the addresses on " + ipvsDummyDevice
	ipt, err := trace.ParseIPTablesSave(string(save))
	if err != nil {
		return nil, nil, "", fmt.Errorf("iptables-save: %w", err)
	}
	setText, err := inNetns(ctx, netns, "ipset", "save")
	if err != nil {
		return nil, nil, "", err
	}
	sets, err := trace.ParseIPSets(string(setText))
	if err != nil {
		return nil, nil, "", fmt.Errorf("ipset save: %w", err)
	}
	addrJSON, err := inNetns(ctx, netns, "ip", "-j", "addr", "show", "dev", ipvsDummyDevice)
	if err != nil {
		return nil, nil, "", fmt.Errorf("no %s interface (is kube-proxy running in ipvs mode here?): %w", ipvsDummyDevice, err)
	}
	bound, err := parseIPAddrJSON(addrJSON)
	if err != nil {
		return nil, nil, "", fmt.Errorf("ip -j addr show dev %s: %w", ipvsDummyDevice, err)
	}
	linkJSON, err := inNetns(ctx, netns, "ip", "-j", "link", "show", "type", "bridge")
	if err != nil {
		return nil, nil, "", err
	}
	bridges, err := parseBridges(linkJSON)
	if err != nil {
		return nil, nil, "", fmt.Errorf("ip -j link show type bridge: %w", err)
	}
	v, err := trace.NewIPVS(ipt, sets, vss, bound)
	if err != nil {
		return nil, nil, "", err
	}
	return v, bridges, read, nil
}

// ipvsTable converts what net-utils' ipvs Interface lists.
func ipvsTable(h utilipvs.Interface) ([]trace.VirtualServer, error) {
	vss, err := h.GetVirtualServers()
	if err != nil {
		return nil, err
	}
	out := make([]trace.VirtualServer, 0, len(vss))
	for _, vs := range vss {
		a, ok := netip.AddrFromSlice(vs.Address)
		if !ok {
			return nil, fmt.Errorf("virtual server %s: address %q", vs, vs.Address)
		}
		tv := trace.VirtualServer{Address: a.Unmap(), Port: vs.Port, Protocol: vs.Protocol, Scheduler: vs.Scheduler,
			Persistent: vs.Flags&utilipvs.FlagPersistent != 0, Timeout: vs.Timeout}
		if vs.Flags&utilipvs.FlagSourceHash != 0 {
			tv.Flags = append(tv.Flags, "sh-port")
		}
		rss, err := h.GetRealServers(vs)
		if err != nil {
			return nil, fmt.Errorf("real servers of %s: %w", vs, err)
		}
		for _, rs := range rss {
			ra, ok := netip.AddrFromSlice(rs.Address)
			if !ok {
				return nil, fmt.Errorf("real server %s of %s: address %q", rs, vs, rs.Address)
			}
			// net-utils does not report the forwarding method; kube-proxy
			// only programs masquerading (NAT) real servers.
			tv.RealServers = append(tv.RealServers, trace.RealServer{Address: ra.Unmap(), Port: rs.Port, Weight: rs.Weight, Forward: "Masq"})
		}
		out = append(out, tv)
	}
	return out, nil
}

// parseIPAddrJSON reads the addresses of every interface from `ip -j addr
// show`, without zones.
func parseIPAddrJSON(out []byte) ([]netip.Addr, error) {
	var links []struct {
		AddrInfo []struct {
			Local string `json:"local"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if ip, err := netip.ParseAddr(a.Local); err == nil {
				addrs = append(addrs, ip.WithZone(""))
			}
		}
	}
	return addrs, nil
}

func parseBridges(out []byte) ([]string, error) {
	var links []struct {
		Name string `json:"ifname"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, err
	}
	// Not nil: "no bridges" is an answer, unlike "not known".
	names := []string{}
	for _, l := range links {
		names = append(names, l.Name)
	}
	return names, nil
}
