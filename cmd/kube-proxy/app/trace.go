package app

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	utiliptables "k8s.io/net-utils/iptables"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// traceOptions are the flags of `kube-proxy trace`; the proxy's own flags
// (--proxy-mode, --manifests, --hostname-override, --config, ...) are there
// too, with their usual meaning, for computing the rules kube-proxy would
// program.
type traceOptions struct {
	proxy       *Options
	from        string
	to          string
	fromHost    bool
	inInterface string
	netns       string
	output      string
	live        bool
	localAddrs  []string
	verbose     bool
	maxDiffs    int
	bridges     []string

	// proxyFlags names the flags that are kube-proxy's own (to.proxy's),
	// as opposed to trace's: --help lists them apart, and a dry run in
	// another namespace is given them.
	proxyFlags map[string]bool
	// socketLBPinPath is where the socket load balancer's maps are read from
	// (empty: ebpf.DefaultPinPath); tests point it at a private bpf filesystem.
	socketLBPinPath string
	// detectedMode says the mode was detected from the live rules, not
	// given.
	detectedMode bool
	// selfCommand is how this binary is run again (as `kube-proxy args...`)
	// to compute rules inside another network namespace; tests run the test
	// binary as kube-proxy instead.
	selfCommand func(ctx context.Context, args []string) (*exec.Cmd, error)
}

// traceProxyFlagsIntro heads kube-proxy's own flags in trace --help.
const traceProxyFlagsIntro = `  kube-proxy's own flags, with their usual meaning. They compute the rules kube-proxy
  would program (--manifests, --kubeconfig, --master, --config, --hostname-override, ...)
  and choose which live rules to read (--proxy-mode, and on Linux --iptables-backend).`

// traceHiddenProxyFlags are kube-proxy flags that make no sense for trace.
var traceHiddenProxyFlags = []string{"dry-run", "dry-run-follow", "cleanup", "init-only", "write-config-to"}

// newTraceCommand is `kube-proxy trace`.
func newTraceCommand() *cobra.Command {
	cmd, _ := newTraceCommandOptions()
	return cmd
}

// newTraceCommandOptions also returns the options the flags are bound to,
// so tests can run the command without its RunE (which silences klog
// process-wide).
func newTraceCommandOptions() (*cobra.Command, *traceOptions) {
	to := &traceOptions{proxy: NewOptions(), output: "text", maxDiffs: 10, proxyFlags: map[string]bool{}, selfCommand: selfCommand}
	cmd := &cobra.Command{
		Use:   "trace --to IP:PORT[/PROTO] (--from IP | --from-host)",
		Short: "Show what this node's rules do with a packet to a Service",
		Long: `trace answers "what happens to this packet on this node?" from the rules the
node holds, without sending anything: accepted, dropped or rejected, every
endpoint it could be DNATed to with its probability, session affinity,
masquerading, and the chains, rules and map lookups that decide it, each
annotated with the Service and endpoint it belongs to.

By default it reads the live rules of this node (iptables-save of the iptables
backend kube-proxy would use, detected as kube-proxy detects it, or nft -j list
ruleset of the packet's family and inet in nftables mode, or in ipvs mode
iptables-save, ipset save, the IPVS table and the addresses on kube-ipvs0);
--netns reads those of another network namespace. The answer says which rules
were read, and says so when they hold nothing of kube-proxy's (with --live that
is an error: there is nothing to trace).
With --manifests (or --kubeconfig/--master) it computes the rules kube-proxy
would program instead, without touching the host; with --live as well, it
traces the live rules and says whether they differ from the computed ones
(with --netns, the rules are computed inside that namespace, as kube-proxy
running there computes them).

In ipvs mode the computed rules are the planned state of kube-proxy's ipvs
dry run; with --live it is compared with the live state: the IPVS virtual
and real servers, kube-proxy's ip sets, the addresses on kube-ipvs0 and the
iptables rules.

Rules the tracer does not model (another program's matches, a rule edited
by hand) are named in the answer rather than guessed at.`,
		Example: `  kube-proxy trace --proxy-mode nftables --from 10.244.1.5 --to 10.96.0.10:53/udp
  kube-proxy trace --from 203.0.113.7 --in-interface eth0 --to 192.0.2.10:30080/tcp -o json
  kube-proxy trace --proxy-mode nftables --manifests examples/cluster --hostname-override node-1 \
      --from 198.19.1.5 --to 10.96.0.10:80`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to.verbose {
				return to.run(cmd.Context(), cmd.Flags(), cmd.OutOrStdout())
			}
			// The answer goes to stdout; the informers' and the dry run's
			// progress logs would only bury it. The error, which the
			// caller would log, is printed here instead.
			klog.SetLogger(logr.Discard())
			err := to.run(cmd.Context(), cmd.Flags(), cmd.OutOrStdout())
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "Error: %v\n", err)
			}
			return err
		},
		SilenceUsage: true,
	}
	fs := cmd.Flags()
	to.proxy.AddFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) { to.proxyFlags[f.Name] = true })
	for _, name := range traceHiddenProxyFlags {
		if fs.Lookup(name) != nil {
			_ = fs.MarkHidden(name)
		}
	}
	fs.StringVar(&to.from, "from", to.from, "Source address of the packet (a pod's IP, a client's IP, or with --from-host one of the node's own addresses).")
	fs.StringVar(&to.to, "to", to.to, "Destination as IP:PORT/PROTO (PROTO tcp, udp or sctp; default tcp); IPv6 as [IP]:PORT/PROTO.")
	fs.BoolVar(&to.fromHost, "from-host", to.fromHost, "The packet is sent by a process on the node itself (the output path), not received from a pod or another host.")
	fs.StringVar(&to.inInterface, "in-interface", to.inInterface, "The interface the packet arrives on (a pod's veth, the pod bridge, or an uplink); used by rules that match interfaces, such as --detect-local-mode=InterfaceNamePrefix.")
	fs.StringVar(&to.netns, "netns", to.netns, "Read the live rules of this network namespace: a name under /run/netns, or a path such as /proc/PID/ns/net. Rules compared with them are computed inside it.")
	fs.StringVarP(&to.output, "output", "o", to.output, "Output format: text or json.")
	fs.BoolVar(&to.live, "live", to.live, "Trace the live rules of the node even when --manifests or a kubeconfig is given (they are then compared with the computed rules). The default is live unless --manifests, --kubeconfig or --master is set.")
	fs.StringSliceVar(&to.localAddrs, "local-addresses", to.localAddrs, "The node's addresses (what rules call LOCAL). Default: read from the (--netns) network namespace for live rules, the Node's addresses for computed ones.")
	fs.BoolVar(&to.verbose, "verbose", to.verbose, "Show every step of each path, also jumps that decided nothing, and kube-proxy's logs while it computes rules.")
	fs.StringSliceVar(&to.bridges, "bridges", to.bridges, "The node's Linux bridges (what ipvs mode's -m physdev --physdev-is-in rules match a packet arriving on). Default: read from the live node in ipvs mode.")
	fs.IntVar(&to.maxDiffs, "max-differences", to.maxDiffs, "How many differences between the live and the computed rules to list (0 for all).")
	_ = cmd.MarkFlagFilename("manifests", "yaml", "yml", "json")
	cmd.SetUsageFunc(to.usage)
	return cmd, to
}

// usage lists trace's own flags first and kube-proxy's (some 70, which
// only matter for computing rules) under a heading of their own, so the
// handful that say what to trace are not lost among them.
func (to *traceOptions) usage(c *cobra.Command) error {
	own := pflag.NewFlagSet("trace", pflag.ContinueOnError)
	proxy := pflag.NewFlagSet("kube-proxy", pflag.ContinueOnError)
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if to.proxyFlags[f.Name] {
			proxy.AddFlag(f)
		} else {
			own.AddFlag(f)
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  %s\n", c.UseLine())
	if c.HasExample() {
		fmt.Fprintf(&b, "\nExamples:\n%s\n", c.Example)
	}
	fmt.Fprintf(&b, "\nFlags:\n%s", own.FlagUsages())
	if u := proxy.FlagUsages(); u != "" {
		fmt.Fprintf(&b, "\nKube-proxy Flags:\n%s\n%s", traceProxyFlagsIntro, u)
	}
	if c.HasAvailableInheritedFlags() {
		fmt.Fprintf(&b, "\nGlobal Flags:\n%s", c.InheritedFlags().FlagUsages())
	}
	_, err := io.WriteString(c.OutOrStderr(), b.String())
	return err
}

// traceReport is the JSON answer.
type traceReport struct {
	Rules  string        `json:"rules"`
	Result *trace.Result `json:"result"`
	// Computed is the answer of the rules kube-proxy would program now,
	// when they were computed as well as read.
	Computed *trace.Result `json:"computed,omitempty"`
	// InSync says whether the live rules are what kube-proxy would program;
	// absent when only one of them was read.
	InSync      *bool              `json:"inSync,omitempty"`
	Differences []trace.Difference `json:"differences,omitempty"`
	// Read says which rules were read from the kernel, and why those: in
	// iptables mode the backend (iptables-legacy or iptables-nft) chosen the
	// way kube-proxy chooses it.
	Read string `json:"read,omitempty"`
	// Note says what the answer leaves out, or that the live rules hold
	// nothing of kube-proxy's.
	Note string `json:"note,omitempty"`
	// SocketLB is what the socket load balancer (--socket-lb) does with the
	// connection before the rules see it, read back from its pinned maps; absent
	// when none is pinned on a live node (or the rules were only computed).
	SocketLB *trace.SocketLB `json:"socketLB,omitempty"`
}

func (to *traceOptions) run(ctx context.Context, fs *pflag.FlagSet, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if to.output != "text" && to.output != "json" {
		return fmt.Errorf("--output %q: want text or json", to.output)
	}
	o := to.proxy
	if (to.live || to.netns != "" || (o.manifests == "" && o.master == "" && !fs.Changed("kubeconfig"))) &&
		!fs.Changed("proxy-mode") && o.ConfigFile == "" {
		// Trace the mode the node runs, and compute that same mode (with
		// that mode's defaults) to compare.
		family := v1.IPv4Protocol
		if dest, _, _ := strings.Cut(to.to, "/"); strings.HasPrefix(dest, "[") {
			family = v1.IPv6Protocol
		}
		if err := fs.Set("proxy-mode", detectMode(ctx, to.netns, family)); err != nil {
			return err
		}
		to.detectedMode = true
	}
	if err := o.Complete(fs); err != nil {
		return err
	}
	computed := o.manifests != "" || o.master != "" || o.config.ClientConnection.Kubeconfig != ""
	live := to.live || to.netns != "" || !computed
	if fs.Changed("live") && !to.live {
		if !computed {
			return fmt.Errorf("--live=false needs --manifests, --kubeconfig or --master to compute the rules from")
		}
		live = false
	}

	pk, err := to.packet()
	if err != nil {
		return err
	}
	family := v1.IPv4Protocol
	if !pk.Dst.Unmap().Is4() {
		family = v1.IPv6Protocol
	}
	mode := string(o.config.Mode)

	var localAddrs []netip.Addr
	for _, a := range to.localAddrs {
		addr, err := netip.ParseAddr(strings.TrimSpace(a))
		if err != nil {
			return fmt.Errorf("--local-addresses %q: %w", a, err)
		}
		localAddrs = append(localAddrs, addr)
	}

	var liveRules, computedRules trace.Tracer
	node := &trace.Node{}
	report := traceReport{}
	if computed {
		var text string
		var nodeIPs []netip.Addr
		if to.netns != "" {
			// What is compared with the namespace's rules is computed in
			// it too, as if trace ran there.
			text, err = to.computeRulesInNetns(ctx, fs)
		} else {
			text, nodeIPs, err = computeRules(ctx, o, localAddrs...)
		}
		if err != nil {
			return fmt.Errorf("computing the rules from %s: %w", computedFrom(o), err)
		}
		if computedRules, err = parseComputed(text, mode, family); err != nil {
			return fmt.Errorf("reading the rules computed from %s: %w", computedFrom(o), err)
		}
		if !live {
			node.LocalAddrs = nodeIPs
			report.Rules = fmt.Sprintf("computed from %s (%s, %s)", computedFrom(o), mode, family)
		}
	}
	if live {
		where := "this node"
		if to.netns != "" {
			where = "network namespace " + to.netns
		}
		if mode == string(kubeproxyconfig.ProxyModeIPVS) {
			v, bridges, read, err := to.readLiveIPVS(ctx, fs, family)
			report.Read = read
			if err != nil {
				return fmt.Errorf("reading the live %s rules of %s: %w", mode, where, err)
			}
			liveRules, node.Bridges = v, bridges
		} else {
			var data []byte
			if data, report.Read, err = to.readLiveText(ctx, fs, mode, family); err != nil {
				return fmt.Errorf("reading the live %s rules of %s: %w", mode, where, err)
			}
			if liveRules, err = parseLive(data, mode); err != nil {
				return fmt.Errorf("reading the live %s rules of %s: %w", mode, where, err)
			}
		}
		report.Rules = fmt.Sprintf("live, %s (%s, %s)", where, mode, family)
		if !trace.HasKubeProxyRules(liveRules) {
			// Without kube-proxy's rules the trace is of whatever else the
			// node holds: an answer such as ACCEPT 100% would read as
			// "the Service works".
			missing := fmt.Sprintf("no kube-proxy rules in %s: %s", where, noRulesDetail(mode, family, to.detectedMode))
			if to.live {
				if report.Read != "" {
					missing += " (read " + report.Read + ")"
				}
				return fmt.Errorf("%s; nothing to trace (is kube-proxy running there, in this mode?)", missing)
			}
			report.Note = missing + "; the answer below is what the other rules do with the packet, without kube-proxy"
		}
		if len(to.localAddrs) == 0 {
			if node.LocalAddrs, err = readLocalAddrs(ctx, to.netns); err != nil {
				return fmt.Errorf("reading the local addresses of %s (or give --local-addresses): %w", where, err)
			}
		}
		if mode == string(kubeproxyconfig.ProxyModeIPTables) {
			node.Recent = readRecent(ctx, to.netns)
		}
		// The socket load balancer acts before the rules, on sockets in its
		// cgroup, whatever their network namespace: its maps are the node's.
		if report.SocketLB, err = readSocketLB(pk, to.socketLBPinPath, o.socketLB.enabled); err != nil {
			return fmt.Errorf("reading the socket load balancer's maps: %w", err)
		}
	}
	if len(localAddrs) > 0 {
		node.LocalAddrs = localAddrs
	}

	if fs.Changed("bridges") {
		node.Bridges = append([]string{}, to.bridges...)
	}

	tracer := computedRules
	if live {
		tracer = liveRules
	}
	if report.Result, err = tracer.Trace(pk, node); err != nil {
		return err
	}
	if live && computed {
		diffs, err := compareRules(liveRules, computedRules, family, to.maxDiffs)
		if err != nil {
			return err
		}
		inSync := len(diffs) == 0
		report.InSync, report.Differences = &inSync, diffs
		if report.Computed, err = computedRules.Trace(pk, node); err != nil {
			return err
		}
	}
	if to.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(report)
	}
	return to.writeText(out, o, &report)
}

// compareRules lists at most limit (0: all) differences between the live
// rules and the computed ones of the same mode, for the packet's family.
func compareRules(liveRules, computedRules trace.Tracer, family v1.IPFamily, limit int) ([]trace.Difference, error) {
	mismatch := fmt.Errorf("the live rules are %s but --proxy-mode computes %s", liveRules.Mode(), computedRules.Mode())
	switch l := liveRules.(type) {
	case *trace.IPTables:
		c, ok := computedRules.(*trace.IPTables)
		if !ok {
			return nil, mismatch
		}
		return trace.CompareIPTables(l, c, limit), nil
	case *trace.NFTables:
		c, ok := computedRules.(*trace.NFTables)
		if !ok {
			return nil, mismatch
		}
		return trace.CompareNFT(l, c, limit), nil
	case *trace.IPVS:
		c, ok := computedRules.(*trace.IPVS)
		if !ok {
			return nil, mismatch
		}
		setFamily := "inet"
		if family == v1.IPv6Protocol {
			setFamily = "inet6"
		}
		return trace.CompareIPVS(l, c, setFamily, limit), nil
	}
	return nil, fmt.Errorf("comparing %s rules is not implemented", liveRules.Mode())
}

func (to *traceOptions) writeText(out io.Writer, o *Options, r *traceReport) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Rules: %s\n", r.Rules)
	if r.Read != "" {
		fmt.Fprintf(&b, "Read: %s\n", r.Read)
	}
	if r.Note != "" {
		fmt.Fprintf(&b, "Note: %s\n", r.Note)
	}
	if r.SocketLB != nil {
		b.WriteString("\n")
		if err := r.SocketLB.WriteText(&b); err != nil {
			return err
		}
	}
	if err := r.Result.WriteText(&b, to.verbose); err != nil {
		return err
	}
	if r.InSync != nil {
		if *r.InSync {
			fmt.Fprintf(&b, "\nThe live rules are what kube-proxy would program now (computed from %s).\n", computedFrom(o))
		} else {
			fmt.Fprintf(&b, "\nThe live rules DIFFER from what kube-proxy would program now (computed from %s); first differences:\n", computedFrom(o))
			for _, d := range r.Differences {
				fmt.Fprintf(&b, "  %s\n", d)
			}
			if outcomeKeys(r.Result) != outcomeKeys(r.Computed) {
				fmt.Fprintf(&b, "\nWith the computed rules the packet would instead go: %s\n", outcomeKeys(r.Computed))
			}
		}
	}
	_, err := out.Write(b.Bytes())
	return err
}

func outcomeKeys(r *trace.Result) string {
	var parts []string
	for _, o := range r.Outcomes {
		parts = append(parts, fmt.Sprintf("%s (%.1f%%)", o.Key(), o.Probability*100))
	}
	return strings.Join(parts, ", ")
}

func computedFrom(o *Options) string {
	if o.manifests != "" {
		return "--manifests " + o.manifests
	}
	return "the API server"
}

// packet builds the traced packet from the flags.
func (to *traceOptions) packet() (trace.Packet, error) {
	pk := trace.Packet{Protocol: "tcp", From: trace.FromExternal, InInterface: to.inInterface}
	if to.to == "" {
		return pk, fmt.Errorf("--to is required (IP:PORT[/PROTO])")
	}
	dest, proto, hasProto := strings.Cut(to.to, "/")
	if hasProto {
		pk.Protocol = strings.ToLower(proto)
	}
	ap, err := netip.ParseAddrPort(dest)
	if err != nil {
		return pk, fmt.Errorf("--to %q: want IP:PORT/PROTO ([IP]:PORT/PROTO for IPv6): %w", to.to, err)
	}
	pk.Dst, pk.Port = ap.Addr().Unmap(), ap.Port()
	switch {
	case to.from != "":
		a, err := netip.ParseAddr(to.from)
		if err != nil {
			return pk, fmt.Errorf("--from %q: %w", to.from, err)
		}
		pk.Src = a.Unmap()
	case to.fromHost:
		// A process that does not bind picks the loopback address for a
		// local destination; give --from for anything else.
		pk.Src = netip.MustParseAddr("127.0.0.1")
		if !pk.Dst.Is4() {
			pk.Src = netip.IPv6Loopback()
		}
	default:
		return pk, fmt.Errorf("--from is required unless --from-host is given")
	}
	if to.fromHost {
		pk.From, pk.InInterface = trace.FromHost, ""
	} else if to.isPodSource(pk.Src) {
		pk.From = trace.FromPod
	}
	return pk, nil
}

// isPodSource says whether src is in --cluster-cidr, so the answer can call
// it a pod.
func (to *traceOptions) isPodSource(src netip.Addr) bool {
	for _, c := range to.proxy.config.DetectLocal.ClusterCIDRs {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil && p.Contains(src) {
			return true
		}
	}
	return false
}

// computeRules runs the proxier in dry-run mode, as `kube-proxy --dry-run`
// does, and returns what it would program and the node's addresses: the
// Node's, or localAddrs when given (see setDryRunNodeAddresses).
func computeRules(ctx context.Context, o *Options, localAddrs ...netip.Addr) (string, []netip.Addr, error) {
	// The dry run's own logs are noise in this command's answer; -v shows
	// them.
	if !klog.V(2).Enabled() {
		ctx = klog.NewContext(ctx, logr.Discard())
	}
	o.dryRun = true
	ctx, _, cancel := withDryRunDeadline(ctx, o.dryRunTimeout)
	defer cancel()
	if o.manifests == "" {
		client, err := createClient(ctx, o.config.ClientConnection, o.master)
		if err != nil {
			return "", nil, err
		}
		if err := waitForAPIServer(ctx, client); err != nil {
			return "", nil, err
		}
	}
	s, err := newProxyServer(ctx, o.config, serverOptions{
		master: o.master, manifests: o.manifests, manifestsRescan: time.Hour, dryRun: true, flags: o.flags,
		nodeAddresses: true, localAddresses: ipsOf(localAddrs),
	})
	if err != nil {
		return "", nil, err
	}
	var buf bytes.Buffer
	s.dryRunOut = &buf
	if err := s.Run(ctx); err != nil {
		return "", nil, err
	}
	var addrs []netip.Addr
	for _, ip := range s.nodeAddresses() {
		if a, ok := netip.AddrFromSlice(ip); ok && ip != nil && !a.Unmap().IsUnspecified() {
			addrs = append(addrs, a.Unmap())
		}
	}
	return buf.String(), addrs, nil
}

// computeRulesInNetns computes the rules inside the --netns namespace, as
// `ip netns exec X kube-proxy trace` would: a dry run's proxiers read the
// node's addresses (those --nodeport-addresses selects decide the NodePort
// rules) from the namespace of whatever thread they run on, and the
// goroutines of a dry run in this process cannot be moved into another
// namespace. So this binary runs `kube-proxy --dry-run` with the same
// kube-proxy flags, started from a thread inside the namespace, and the
// child sees everything from there.
func (to *traceOptions) computeRulesInNetns(ctx context.Context, fs *pflag.FlagSet) (string, error) {
	// The namespace's own interfaces, as kube-proxy there reads them, not the Node's
	// addresses a dry run from manifests otherwise assumes; --local-addresses when given.
	addrs := "host"
	if len(to.localAddrs) > 0 {
		addrs = strings.Join(to.localAddrs, ",")
	}
	args := append([]string{"--dry-run", "--dry-run-node-addresses=" + addrs}, to.proxyArgs(fs)...)
	cmd, err := to.selfCommand(ctx, args)
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if to.verbose {
		cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	}
	if err := runInNetns(to.netns, cmd.Start); err != nil {
		return "", fmt.Errorf("starting kube-proxy --dry-run in network namespace %q: %w", to.netns, err)
	}
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("kube-proxy --dry-run in network namespace %q: %w: %s", to.netns, err, lastLines(stderr.String(), 5))
	}
	return stdout.String(), nil
}

// selfCommand runs this binary as kube-proxy with args.
func selfCommand(ctx context.Context, args []string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to run a dry run: %w", err)
	}
	return exec.CommandContext(ctx, exe, args...), nil
}

// proxyArgs spells the kube-proxy flags set on the trace command (also
// --proxy-mode when it was detected) as arguments for kube-proxy itself.
func (to *traceOptions) proxyArgs(fs *pflag.FlagSet) []string {
	var args []string
	fs.Visit(func(f *pflag.Flag) {
		if !to.proxyFlags[f.Name] || slices.Contains(traceHiddenProxyFlags, f.Name) {
			return
		}
		v := f.Value.String()
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			// String() brackets a slice ("[a,b]"); Set reads CSV.
			var b strings.Builder
			w := csv.NewWriter(&b)
			_ = w.Write(sv.GetSlice())
			w.Flush()
			v = strings.TrimSuffix(b.String(), "\n")
		}
		args = append(args, "--"+f.Name+"="+v)
	})
	return args
}

// lastLines is the end of a command's log, for an error.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// parseComputed reads one family's part of the dry run's output.
func parseComputed(text, mode string, family v1.IPFamily) (trace.Tracer, error) {
	header := "# kube-proxy --dry-run: " + string(family) + ","
	var section strings.Builder
	in := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "# kube-proxy --dry-run: ") {
			in = strings.HasPrefix(line, header)
			continue
		}
		if in {
			section.WriteString(line + "\n")
		}
	}
	if section.Len() == 0 {
		return nil, fmt.Errorf("the dry run wrote no %s rules (is the node %s-capable?)", family, family)
	}
	switch kubeproxyconfig.ProxyMode(mode) {
	case kubeproxyconfig.ProxyModeNFTables:
		return trace.ParseNFTScript(section.String(), "kube-proxy")
	case kubeproxyconfig.ProxyModeIPTables, "":
		return parseIPTablesDryRun(section.String())
	case kubeproxyconfig.ProxyModeIPVS:
		return parseIPVSDryRun(section.String())
	}
	return nil, fmt.Errorf("proxy mode %q cannot be traced from computed rules (iptables and nftables can)", mode)
}

// parseIPTablesDryRun reads an iptables dry run: the restore input, plus
// the "# ensure:" lines for the jumps kube-proxy keeps in the builtin
// chains.
func parseIPTablesDryRun(text string) (*trace.IPTables, error) {
	ipt, err := trace.ParseIPTablesSave(text)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, "# ensure: -t ")
		if !ok {
			continue
		}
		table, rest, _ := strings.Cut(rest, " ")
		op, rest, _ := strings.Cut(rest, " ")
		chain, args, _ := strings.Cut(rest, " ")
		switch op {
		case "-N":
			ipt.EnsureChain(table, chain)
		case "-I", "-A":
			if err := ipt.EnsureRule(table, chain, op == "-I", args); err != nil {
				return nil, fmt.Errorf("%q: %w", line, err)
			}
		default:
			return nil, fmt.Errorf("unexpected %q", line)
		}
	}
	return ipt, nil
}

// inNetns runs a command in the network namespace netns (none: this one).
func inNetns(ctx context.Context, netns, name string, args ...string) ([]byte, error) {
	if netns != "" {
		path := netns
		if !strings.Contains(netns, "/") {
			path = "/run/netns/" + netns
		}
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("network namespace %q: %w", netns, err)
		}
		// nsenter gets the tool's full path: busybox's nsenter runs its own
		// applet of a bare name (busybox's ip has no -j, for one) before PATH.
		if full, err := exec.LookPath(name); err == nil {
			name = full
		}
		args = append([]string{"--net=" + path, name}, args...)
		name = "nsenter"
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// detectMode picks nftables when kube-proxy's nftables table exists for
// family, ipvs when the ipvs proxier's kube-ipvs0 interface exists,
// iptables otherwise.
func detectMode(ctx context.Context, netns string, family v1.IPFamily) string {
	fam := nftFamily(family)
	if _, err := inNetns(ctx, netns, "nft", "list", "table", fam, "kube-proxy"); err == nil {
		return string(kubeproxyconfig.ProxyModeNFTables)
	}
	if _, err := inNetns(ctx, netns, "ip", "link", "show", ipvsDummyDevice); err == nil {
		return string(kubeproxyconfig.ProxyModeIPVS)
	}
	return string(kubeproxyconfig.ProxyModeIPTables)
}

// readLiveText reads the rules from the kernel: the packet family's and
// inet tables in nftables mode, the family's tables in iptables mode (from
// the backend kube-proxy would use, see traceIPTablesBackend). It also says
// what it read, for the answer.
func (to *traceOptions) readLiveText(ctx context.Context, fs *pflag.FlagSet, mode string, family v1.IPFamily) ([]byte, string, error) {
	return readLiveText(ctx, fs, to.netns, mode, family)
}

// readLiveText is traceOptions.readLiveText for netns, with the iptables
// backend fs's --iptables-backend names (auto, detected in netns as
// kube-proxy detects it, when fs is nil).
func readLiveText(ctx context.Context, fs *pflag.FlagSet, netns, mode string, family v1.IPFamily) ([]byte, string, error) {
	where := "this node"
	if netns != "" {
		where = "network namespace " + netns
	}
	switch kubeproxyconfig.ProxyMode(mode) {
	case kubeproxyconfig.ProxyModeNFTables:
		// Only the tables a packet of this family can cross: on a
		// dual-stack node the other family's (as large) table would
		// double the read.
		fam := nftFamily(family)
		read := fmt.Sprintf("nft -j list ruleset %s and inet, in %s", fam, where)
		own, err := inNetns(ctx, netns, "nft", "-j", "list", "ruleset", fam)
		if err != nil {
			return nil, read, err
		}
		inet, err := inNetns(ctx, netns, "nft", "-j", "list", "ruleset", "inet")
		if err != nil {
			return nil, read, err
		}
		data, err := joinNFTJSON(own, inet)
		return data, read, err
	case kubeproxyconfig.ProxyModeIPTables, "":
		choice, err := traceIPTablesBackend(ctx, fs, netns)
		if err != nil {
			return nil, "", err
		}
		save := choice.Backend.SaveCommand(iptablesProtocol(family))
		data, err := inNetns(ctx, netns, save)
		read := fmt.Sprintf("%s rules (%s) from %s, the backend kube-proxy there would use: %s",
			iptablesBackendName(choice.Backend, family), save, where, choice.Reason)
		return data, read, err
	}
	return nil, "", fmt.Errorf("proxy mode %q cannot be traced (iptables and nftables can)", mode)
}

// nftFamily is the nftables family of an IP family's tables.
func nftFamily(family v1.IPFamily) string {
	if family == v1.IPv6Protocol {
		return "ip6"
	}
	return "ip"
}

func iptablesProtocol(family v1.IPFamily) utiliptables.Protocol {
	if family == v1.IPv6Protocol {
		return utiliptables.ProtocolIPv6
	}
	return utiliptables.ProtocolIPv4
}

// iptablesBackendName names what was read the way an operator knows it:
// "iptables-legacy", "ip6tables-nft", or "iptables" from PATH.
func iptablesBackendName(b utiliptables.Backend, family v1.IPFamily) string {
	name := "iptables"
	if family == v1.IPv6Protocol {
		name = "ip6tables"
	}
	if b != utiliptables.BackendPath {
		name += "-" + string(b)
	}
	return name
}

// noRulesDetail says what was looked for and not found.
func noRulesDetail(mode string, family v1.IPFamily, detected bool) string {
	fam := nftFamily(family)
	var s string
	switch kubeproxyconfig.ProxyMode(mode) {
	case kubeproxyconfig.ProxyModeNFTables:
		s = "no chains in nftables table " + fam + " kube-proxy"
	default:
		s = "no KUBE-SERVICES chain in the nat table"
	}
	if detected {
		s = "no nftables table " + fam + " kube-proxy, no " + ipvsDummyDevice + " interface, and " + s
	}
	return s
}

// joinNFTJSON joins two `nft -j` documents ({"nftables": [...]}) into one.
func joinNFTJSON(a, b []byte) ([]byte, error) {
	ai, bi := bytes.IndexByte(a, '['), bytes.IndexByte(b, '[')
	aj, bj := bytes.LastIndexByte(a, ']'), bytes.LastIndexByte(b, ']')
	if ai < 0 || bi < 0 || aj < ai || bj < bi {
		return nil, fmt.Errorf("nft -j output is not {\"nftables\": [...]}")
	}
	out := make([]byte, 0, len(a)+len(b))
	out = append(out, a[:aj]...)
	if inner := bytes.TrimSpace(b[bi+1 : bj]); len(inner) > 0 {
		out = append(out, ',')
		out = append(out, inner...)
	}
	return append(out, a[aj:]...), nil
}

func parseLive(data []byte, mode string) (trace.Tracer, error) {
	if kubeproxyconfig.ProxyMode(mode) == kubeproxyconfig.ProxyModeNFTables {
		return trace.ParseNFTJSON(data, "kube-proxy")
	}
	return trace.ParseIPTablesSave(string(data))
}

// readLocalAddrs lists the addresses of every interface (`ip -j addr`).
func readLocalAddrs(ctx context.Context, netns string) ([]netip.Addr, error) {
	out, err := inNetns(ctx, netns, "ip", "-j", "addr", "show")
	if err != nil {
		return nil, err
	}
	addrs, err := parseIPAddrJSON(out)
	if err != nil {
		return nil, fmt.Errorf("ip -j addr show: %w", err)
	}
	return addrs, nil
}

// readRecent reads iptables' -m recent lists (session affinity); a node
// without any has none.
func readRecent(ctx context.Context, netns string) map[string][]netip.Addr {
	out, err := inNetns(ctx, netns, "sh", "-c", `cd /proc/net/xt_recent 2>/dev/null || exit 0; for f in *; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done`)
	if err != nil {
		return nil
	}
	return parseRecent(string(out))
}

func parseRecent(text string) map[string][]netip.Addr {
	m := map[string][]netip.Addr{}
	name := ""
	for _, line := range strings.Split(text, "\n") {
		if n, ok := strings.CutPrefix(line, "== "); ok {
			name = n
			continue
		}
		src, ok := strings.CutPrefix(strings.TrimSpace(line), "src=")
		if !ok || name == "" {
			continue
		}
		src, _, _ = strings.Cut(src, " ")
		if a, err := netip.ParseAddr(src); err == nil {
			m[name] = append(m[name], a)
		}
	}
	return m
}
