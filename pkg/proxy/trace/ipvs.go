package trace

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// VirtualServer is one IPVS virtual server (service) with its real servers.
type VirtualServer struct {
	// Address and Port identify it with Protocol; FWMark instead for a
	// firewall-mark service (Address invalid).
	Address netip.Addr
	Port    uint16
	FWMark  uint32
	// Protocol is "TCP", "UDP" or "SCTP" (as ipvsadm writes it).
	Protocol  string
	Scheduler string
	// Persistent services send a client back to the real server it was
	// given for Timeout seconds after its last connection.
	Persistent bool
	Timeout    uint32
	// Flags are other flags as ipvsadm shows them ("ops", "sh-port").
	Flags       []string
	RealServers []RealServer
}

// RealServer is a destination of a virtual server.
type RealServer struct {
	Address netip.Addr
	Port    uint16
	// Weight 0 is a draining destination: new connections are not sent to
	// it (kube-proxy sets it on terminating endpoints).
	Weight int
	// Forward is ipvsadm's forwarding method: "Masq" (NAT, what kube-proxy
	// uses; "" means Masq), "Local", "Route" or "Tunnel".
	Forward string
}

func (vs *VirtualServer) String() string {
	if !vs.Address.IsValid() {
		return "fwmark " + strconv.FormatUint(uint64(vs.FWMark), 10)
	}
	return hostPort(vs.Address, vs.Port) + "/" + vs.Protocol
}

func (rs RealServer) String() string { return hostPort(rs.Address, rs.Port) }

// IPVSChoice is what IPVS did with a packet: the virtual server that took
// it and the real server this outcome went to.
type IPVSChoice struct {
	VirtualServer string `json:"virtualServer"`
	Scheduler     string `json:"scheduler"`
	// PersistenceTimeout is set for a persistent (ClientIP affinity)
	// service, in seconds.
	PersistenceTimeout uint32 `json:"persistenceTimeout,omitempty"`
	RealServer         string `json:"realServer,omitempty"`
	Weight             int    `json:"weight,omitempty"`
	// Candidates are every real server a new connection may go to, with
	// their weights ("ip:port weight 1"); Draining those of weight 0.
	Candidates []string `json:"candidates,omitempty"`
	Draining   []string `json:"draining,omitempty"`
	// Chosen says how the scheduler picks among the candidates.
	Chosen string `json:"chosen,omitempty"`
}

func (c *IPVSChoice) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "virtual server %s (%s)", c.VirtualServer, c.Scheduler)
	if c.RealServer != "" {
		fmt.Fprintf(&b, " -> real server %s weight %d", c.RealServer, c.Weight)
	}
	if c.Chosen != "" {
		b.WriteString("; " + c.Chosen)
	}
	if c.PersistenceTimeout > 0 {
		fmt.Fprintf(&b, "; persistent %ds: a client returns to its earlier real server (connection templates are not read)", c.PersistenceTimeout)
	}
	if len(c.Draining) > 0 {
		fmt.Fprintf(&b, "; draining (weight 0, no new connections): %s", strings.Join(c.Draining, ", "))
	}
	return b.String()
}

// ParseIPVSAdm reads `ipvsadm -Ln` output (add --numeric for names as
// numbers; names are not resolved here).
func ParseIPVSAdm(text string) ([]VirtualServer, error) {
	var out []VirtualServer
	for i, line := range strings.Split(text, "\n") {
		lineNo := i + 1
		t := strings.TrimSpace(line)
		w := strings.Fields(t)
		switch {
		case t == "" || strings.HasPrefix(t, "IP Virtual Server") || strings.HasPrefix(t, "Prot ") ||
			strings.HasPrefix(t, "-> RemoteAddress"):
		case w[0] == "->":
			if len(out) == 0 {
				return nil, fmt.Errorf("line %d: real server before any virtual server: %q", lineNo, t)
			}
			if len(w) < 4 {
				return nil, fmt.Errorf("line %d: %q: want \"-> ADDRESS:PORT FORWARD WEIGHT ...\"", lineNo, t)
			}
			ap, err := netip.ParseAddrPort(w[1])
			if err != nil {
				return nil, fmt.Errorf("line %d: real server %q: %w", lineNo, w[1], err)
			}
			weight, err := strconv.Atoi(w[3])
			if err != nil || weight < 0 {
				return nil, fmt.Errorf("line %d: real server %s weight %q: want a number of 0 or more", lineNo, w[1], w[3])
			}
			vs := &out[len(out)-1]
			vs.RealServers = append(vs.RealServers, RealServer{Address: ap.Addr().Unmap(), Port: ap.Port(), Weight: weight, Forward: w[2]})
		default:
			if len(w) < 3 {
				return nil, fmt.Errorf("line %d: %q: want \"PROTO ADDRESS:PORT SCHEDULER [FLAGS]\"", lineNo, t)
			}
			vs := VirtualServer{Protocol: strings.ToUpper(w[0]), Scheduler: w[2]}
			switch vs.Protocol {
			case "TCP", "UDP", "SCTP":
				ap, err := netip.ParseAddrPort(w[1])
				if err != nil {
					return nil, fmt.Errorf("line %d: virtual server %q: %w", lineNo, w[1], err)
				}
				vs.Address, vs.Port = ap.Addr().Unmap(), ap.Port()
			case "FWM":
				m, err := strconv.ParseUint(w[1], 0, 32)
				if err != nil {
					return nil, fmt.Errorf("line %d: firewall mark %q: %w", lineNo, w[1], err)
				}
				vs.FWMark, vs.Protocol = uint32(m), ""
			default:
				return nil, fmt.Errorf("line %d: protocol %q: want TCP, UDP, SCTP or FWM", lineNo, w[0])
			}
			for j := 3; j < len(w); j++ {
				if w[j] == "persistent" && j+1 < len(w) {
					n, err := strconv.ParseUint(w[j+1], 10, 32)
					if err != nil {
						return nil, fmt.Errorf("line %d: persistence timeout %q: %w", lineNo, w[j+1], err)
					}
					vs.Persistent, vs.Timeout = true, uint32(n)
					j++
					continue
				}
				vs.Flags = append(vs.Flags, w[j])
			}
			out = append(out, vs)
		}
	}
	return out, nil
}

// ParseIPVSAdmSave reads `ipvsadm-save -n` output (what `ipvsadm -S -n`
// writes and `ipvsadm -R` reads): "-A" lines adding virtual servers, each
// followed by "-a" lines adding its real servers. Lines starting with "#"
// and blank lines are skipped.
func ParseIPVSAdmSave(text string) ([]VirtualServer, error) {
	var out []VirtualServer
	index := map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		lineNo := i + 1
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		w := strings.Fields(t)
		if w[0] != "-A" && w[0] != "-a" {
			return nil, fmt.Errorf("line %d: %q: want an -A (virtual server) or -a (real server) line", lineNo, t)
		}
		var vs VirtualServer
		var svc string
		rs := RealServer{Forward: "Route", Weight: 1}
		haveRS := false
		for j := 1; j < len(w); j++ {
			opt := w[j]
			if j+1 >= len(w) && opt != "-m" && opt != "-g" && opt != "-i" {
				return nil, fmt.Errorf("line %d: %s without a value", lineNo, opt)
			}
			switch opt {
			case "-t", "--tcp-service", "-u", "--udp-service", "--sctp-service":
				vs.Protocol = map[string]string{"-t": "TCP", "--tcp-service": "TCP", "-u": "UDP", "--udp-service": "UDP", "--sctp-service": "SCTP"}[opt]
				ap, err := netip.ParseAddrPort(w[j+1])
				if err != nil {
					return nil, fmt.Errorf("line %d: virtual server %q: %w", lineNo, w[j+1], err)
				}
				vs.Address, vs.Port = ap.Addr().Unmap(), ap.Port()
				svc = vs.String()
				j++
			case "-f", "--fwmark-service":
				m, err := strconv.ParseUint(w[j+1], 0, 32)
				if err != nil {
					return nil, fmt.Errorf("line %d: firewall mark %q: %w", lineNo, w[j+1], err)
				}
				vs.FWMark = uint32(m)
				svc = vs.String()
				j++
			case "-s", "--scheduler":
				vs.Scheduler = w[j+1]
				j++
			case "-p", "--persistent":
				n, err := strconv.ParseUint(w[j+1], 10, 32)
				if err != nil {
					return nil, fmt.Errorf("line %d: persistence timeout %q: %w", lineNo, w[j+1], err)
				}
				vs.Persistent, vs.Timeout = true, uint32(n)
				j++
			case "-b", "--sched-flags":
				vs.Flags = append(vs.Flags, strings.Split(w[j+1], ",")...)
				j++
			case "-r", "--real-server":
				ap, err := netip.ParseAddrPort(w[j+1])
				if err != nil {
					return nil, fmt.Errorf("line %d: real server %q: %w", lineNo, w[j+1], err)
				}
				rs.Address, rs.Port, haveRS = ap.Addr().Unmap(), ap.Port(), true
				j++
			case "-w", "--weight":
				n, err := strconv.Atoi(w[j+1])
				if err != nil || n < 0 {
					return nil, fmt.Errorf("line %d: weight %q: want a number of 0 or more", lineNo, w[j+1])
				}
				rs.Weight = n
				j++
			case "-m", "--masquerading":
				rs.Forward = "Masq"
			case "-g", "--gatewaying":
				rs.Forward = "Route"
			case "-i", "--ipip":
				rs.Forward = "Tunnel"
			default:
				return nil, fmt.Errorf("line %d: option %q not understood", lineNo, opt)
			}
		}
		if svc == "" {
			return nil, fmt.Errorf("line %d: %q names no virtual server (-t, -u, --sctp-service or -f)", lineNo, t)
		}
		if w[0] == "-A" {
			if _, dup := index[svc]; dup {
				return nil, fmt.Errorf("line %d: virtual server %s added twice", lineNo, svc)
			}
			index[svc] = len(out)
			out = append(out, vs)
			continue
		}
		k, ok := index[svc]
		if !ok {
			return nil, fmt.Errorf("line %d: real server of virtual server %s, which is not added before it", lineNo, svc)
		}
		if !haveRS {
			return nil, fmt.Errorf("line %d: %q names no real server (-r)", lineNo, t)
		}
		out[k].RealServers = append(out[k].RealServers, rs)
	}
	return out, nil
}

// IPVS is an ipvs-mode node: kube-proxy's iptables rules (which match its
// ip sets), the ip sets, the IPVS table, and the addresses bound to the
// kube-ipvs0 dummy interface (local, so IPVS sees packets to them).
type IPVS struct {
	IPTables       *IPTables
	Sets           map[string]*IPSet
	VirtualServers []VirtualServer
	Bound          []netip.Addr

	byKey  map[vsKey]*VirtualServer
	byMark map[uint32]*VirtualServer
}

type vsKey struct {
	addr  netip.Addr
	proto string
	port  uint16
}

// NewIPVS puts an ipvs-mode node together. Two virtual servers with the
// same address, protocol and port (or mark), or two sets of one name, are
// an error: the kernel holds neither.
func NewIPVS(ipt *IPTables, sets []*IPSet, vss []VirtualServer, bound []netip.Addr) (*IPVS, error) {
	if ipt == nil {
		return nil, fmt.Errorf("ipvs mode: iptables rules missing")
	}
	v := &IPVS{IPTables: ipt, Sets: map[string]*IPSet{}, VirtualServers: vss, Bound: bound,
		byKey: map[vsKey]*VirtualServer{}, byMark: map[uint32]*VirtualServer{}}
	for _, s := range sets {
		if v.Sets[s.Name] != nil {
			return nil, fmt.Errorf("ip set %s given twice", s.Name)
		}
		v.Sets[s.Name] = s
	}
	for i := range v.VirtualServers {
		vs := &v.VirtualServers[i]
		if !vs.Address.IsValid() {
			if v.byMark[vs.FWMark] != nil {
				return nil, fmt.Errorf("virtual server %s given twice", vs)
			}
			v.byMark[vs.FWMark] = vs
			continue
		}
		vs.Address = vs.Address.Unmap()
		vs.Protocol = strings.ToUpper(vs.Protocol)
		switch vs.Protocol {
		case "TCP", "UDP", "SCTP":
		default:
			return nil, fmt.Errorf("virtual server %s: protocol %q: want TCP, UDP or SCTP", vs, vs.Protocol)
		}
		k := vsKey{vs.Address, vs.Protocol, vs.Port}
		if v.byKey[k] != nil {
			return nil, fmt.Errorf("virtual server %s given twice", vs)
		}
		v.byKey[k] = vs
	}
	return v, nil
}

// Mode is "ipvs".
func (v *IPVS) Mode() string { return "ipvs" }

func (v *IPVS) inSet(name string, flags []string, s *pstate, proto string) (bool, string) {
	set := v.Sets[name]
	if set == nil {
		return false, fmt.Sprintf("ip set %s is not among the sets given", name)
	}
	return set.test(flags, s.src, s.dst, proto, s.dport)
}

// lookup finds the virtual server a packet goes to, as the kernel does: a
// firewall-mark service first, then address, protocol and port, then a
// persistent port-0 service of the address.
func (v *IPVS) lookup(mark uint32, proto string, dst netip.Addr, port uint16) *VirtualServer {
	if mark != 0 {
		if vs := v.byMark[mark]; vs != nil {
			return vs
		}
	}
	p := strings.ToUpper(proto)
	if vs := v.byKey[vsKey{dst.Unmap(), p, port}]; vs != nil {
		return vs
	}
	if vs := v.byKey[vsKey{dst.Unmap(), p, 0}]; vs != nil && vs.Persistent {
		return vs
	}
	return nil
}

// schedule hands the states IPVS takes to their real servers: one state
// per destination a new connection may get. States IPVS does not take are
// returned in rest; those it refuses end in finals.
func (v *IPVS) schedule(w *iptWalk, states []pstate, hook string, finals *[]final) (taken, rest []pstate, err error) {
	for _, s := range states {
		vs := v.lookup(s.mark, w.pk.Protocol, s.dst, s.dport)
		if vs == nil {
			rest = append(rest, s)
			continue
		}
		if w.pk.Invalid {
			// No SYN (or a packet conntrack refuses): IPVS schedules only
			// a connection's first packet.
			s.path = append(s.path, Step{Hook: "ipvs " + hook, Lookup: "virtual server " + vs.String() + ": packet does not start a connection, not scheduled"})
			rest = append(rest, s)
			continue
		}
		choice := IPVSChoice{VirtualServer: vs.String(), Scheduler: vs.Scheduler}
		if vs.Persistent {
			choice.PersistenceTimeout = max(vs.Timeout, 1)
		}
		var live []RealServer
		total := 0
		for _, rs := range vs.RealServers {
			if rs.Weight <= 0 {
				choice.Draining = append(choice.Draining, rs.String())
				continue
			}
			live = append(live, rs)
			total += rs.Weight
			choice.Candidates = append(choice.Candidates, fmt.Sprintf("%s weight %d", rs, rs.Weight))
		}
		if len(live) == 0 {
			c := choice
			s.ipvs, s.vs = &c, vs
			s.step(Step{Hook: "ipvs " + hook, Lookup: fmt.Sprintf("virtual server %s (%s): no real server with weight above 0", vs, vs.Scheduler),
				Note: "IPVS answers ICMP port unreachable"})
			*finals = append(*finals, final{s, Reject})
			continue
		}
		equal := vs.Scheduler == "rr"
		for _, rs := range live {
			if err := w.fork(); err != nil {
				return nil, nil, err
			}
			n := s.clone()
			share := float64(rs.Weight) / float64(total)
			switch {
			case equal:
				share = 1 / float64(len(live))
				choice.Chosen = fmt.Sprintf("rr: each of the %d candidates in turn", len(live))
			case vs.Scheduler == "wrr":
				choice.Chosen = fmt.Sprintf("wrr: by weight, %d of %d", rs.Weight, total)
			default:
				choice.Chosen = fmt.Sprintf("scheduler %s decides (by connection counts or a hash); share by weight shown, %d of %d", vs.Scheduler, rs.Weight, total)
			}
			c := choice
			c.RealServer, c.Weight = rs.String(), rs.Weight
			n.ipvs, n.vs = &c, vs
			n.prob *= share
			n.slot = "ipvs " + vs.String() + ": " + c.Chosen
			if vs.Persistent {
				n.affSet = append(n.affSet, fmt.Sprintf("ipvs persistence %s %ds", vs, c.PersistenceTimeout))
			}
			n.dnat, n.dnatted = rs.String(), true
			n.dst, n.dport = rs.Address, rs.Port
			n.endpoint = n.dnat
			n.step(Step{Hook: "ipvs " + hook, Lookup: fmt.Sprintf("virtual server %s (%s) -> real server %s weight %d", vs, vs.Scheduler, rs, rs.Weight),
				Endpoint: rs.String(), Note: fmt.Sprintf("probability %.4g", share)})
			switch rs.Forward {
			case "", "Masq", "Local":
				taken = append(taken, n)
			default:
				n.reason = fmt.Sprintf("IPVS forwarding method %q of real server %s not modelled (kube-proxy uses Masq)", rs.Forward, rs)
				*finals = append(*finals, final{n, Unknown})
			}
		}
	}
	return taken, rest, nil
}

// Trace follows pk through an ipvs-mode node. The kernel's order:
//   - from a pod or another host: raw, mangle and nat PREROUTING; for a
//     local destination (kube-ipvs0 holds every service address) mangle
//     and filter INPUT, then IPVS, which sends what it takes to a real
//     server through raw, mangle and filter OUTPUT and mangle and nat
//     POSTROUTING (masquerade); what it does not take goes on to nat INPUT
//     and a local socket. Other destinations are forwarded as in iptables
//     mode.
//   - from the node: raw, mangle and nat OUTPUT, then IPVS, then filter
//     OUTPUT and POSTROUTING; a local destination comes back in through lo.
func (v *IPVS) Trace(pk Packet, node *Node) (*Result, error) {
	if err := pk.validate(); err != nil {
		return nil, err
	}
	n := Node{}
	if node != nil {
		n = *node
	}
	n.LocalAddrs = append(slices.Clone(n.LocalAddrs), v.Bound...)
	w := &iptWalk{ipt: v.IPTables, pk: &pk, node: &n, ipvs: v}
	var finals []final
	run := func(states []pstate, hook string, tables ...string) ([]pstate, error) {
		return w.runHook(states, hook, tables, &finals)
	}
	start := pstate{src: pk.Src, dst: pk.Dst, dport: pk.Port, prob: 1, iif: pk.InInterface}
	var done []pstate
	if pk.From == FromHost {
		start.iif = ""
		states, err := run([]pstate{start}, "OUTPUT", "raw", "mangle", "nat")
		if err != nil {
			return nil, err
		}
		taken, rest, err := v.schedule(w, states, "OUTPUT", &finals)
		if err != nil {
			return nil, err
		}
		if states, err = run(append(taken, rest...), "OUTPUT", "filter"); err != nil {
			return nil, err
		}
		if states, err = run(states, "POSTROUTING", "mangle", "nat"); err != nil {
			return nil, err
		}
		var local []pstate
		for _, st := range states {
			if n.isLocal(st.dst) {
				st.iif, st.fromLoopRtn = "lo", true
				local = append(local, st)
			} else {
				done = append(done, st)
			}
		}
		if local, err = run(local, "PREROUTING", iptHooks["PREROUTING"]...); err != nil {
			return nil, err
		}
		if local, err = run(local, "INPUT", iptHooks["INPUT"]...); err != nil {
			return nil, err
		}
		done = append(done, local...)
	} else {
		states, err := run([]pstate{start}, "PREROUTING", iptHooks["PREROUTING"]...)
		if err != nil {
			return nil, err
		}
		var local, fwd []pstate
		for _, st := range states {
			if n.isLocal(st.dst) {
				local = append(local, st)
			} else {
				fwd = append(fwd, st)
			}
		}
		if local, err = run(local, "INPUT", "mangle", "filter"); err != nil {
			return nil, err
		}
		taken, rest, err := v.schedule(w, local, "INPUT", &finals)
		if err != nil {
			return nil, err
		}
		// A real server on the node is delivered at once; others leave
		// through the output path, where nat OUTPUT does not run again (the
		// connection's destination NAT was settled in PREROUTING).
		var toLocal, toRemote []pstate
		for _, st := range taken {
			if n.isLocal(st.dst) {
				toLocal = append(toLocal, st)
			} else {
				toRemote = append(toRemote, st)
			}
		}
		if rest, err = run(append(rest, toLocal...), "INPUT", "nat"); err != nil {
			return nil, err
		}
		if toRemote, err = run(toRemote, "OUTPUT", "raw", "mangle", "filter"); err != nil {
			return nil, err
		}
		if toRemote, err = run(toRemote, "POSTROUTING", iptHooks["POSTROUTING"]...); err != nil {
			return nil, err
		}
		if fwd, err = run(fwd, "FORWARD", iptHooks["FORWARD"]...); err != nil {
			return nil, err
		}
		if fwd, err = run(fwd, "POSTROUTING", iptHooks["POSTROUTING"]...); err != nil {
			return nil, err
		}
		done = append(append(append(done, rest...), toRemote...), fwd...)
	}
	for _, st := range done {
		finals = append(finals, final{st, Accept})
	}
	return buildResult(v.Mode(), pk, finals, w.paths)
}
