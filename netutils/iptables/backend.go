package iptables

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"
)

// Backend is one of the two kernel interfaces iptables 1.8 can program, or the
// binaries that happen to be called "iptables" in PATH.
//
// A host's rules live in one backend only: rules written through the other are a
// separate ruleset the kernel also evaluates, so a proxy programming the wrong one
// races the host's own firewall and kubelet's chains instead of cooperating with
// them. Container images ship both sets of binaries for that reason, and something
// has to pick. Upstream's image does it with iptables-wrappers' script, which looks
// at the host's rules on every call; ChooseBackend does the same once, in process.
type Backend string

const (
	// BackendPath runs "iptables", "iptables-save", "iptables-restore" and their
	// ip6tables counterparts by those names from PATH: whatever the host's
	// alternatives point them at. It is what New and NewBestEffort use.
	BackendPath Backend = ""
	// BackendLegacy runs iptables-legacy, iptables-legacy-save, … (x_tables).
	BackendLegacy Backend = "legacy"
	// BackendNFT runs iptables-nft, iptables-nft-save, … (nf_tables).
	BackendNFT Backend = "nft"
)

// String names the backend for logs; BackendPath is "iptables from PATH".
func (b Backend) String() string {
	if b == BackendPath {
		return "iptables from PATH"
	}
	return string(b)
}

// commands returns the iptables, save and restore binaries of b for protocol.
func (b Backend) commands(protocol Protocol) (ipt, save, restore string) {
	base := cmdIPTables
	if protocol == ProtocolIPv6 {
		base = cmdIP6Tables
	}
	if b != BackendPath {
		base += "-" + string(b)
	}
	return base, base + "-save", base + "-restore"
}

// SaveCommand names b's save binary for protocol, e.g. "iptables-legacy-save", for
// callers that read the rules themselves (kube-proxy trace reads them in another
// network namespace) and must read the backend b chose, not whatever PATH holds.
func (b Backend) SaveCommand(protocol Protocol) string {
	_, save, _ := b.commands(protocol)
	return save
}

// BackendMode is what an operator asks for: a backend by name, or detection. It
// implements pflag.Value (Set, String, Type) so a command can bind it to a flag
// directly; an unknown value is rejected when the flag is parsed.
type BackendMode string

const (
	// BackendModeAuto detects the backend the host uses (see ChooseBackend).
	BackendModeAuto BackendMode = "auto"
	// BackendModeLegacy forces iptables-legacy.
	BackendModeLegacy BackendMode = "legacy"
	// BackendModeNFT forces iptables-nft.
	BackendModeNFT BackendMode = "nft"
)

// ParseBackendMode accepts "auto", "legacy" or "nft"; "" means auto.
func ParseBackendMode(s string) (BackendMode, error) {
	switch m := BackendMode(strings.TrimSpace(s)); m {
	case "", BackendModeAuto:
		return BackendModeAuto, nil
	case BackendModeLegacy, BackendModeNFT:
		return m, nil
	default:
		return "", fmt.Errorf("iptables backend %q: want auto, legacy or nft", s)
	}
}

// String is part of pflag.Value.
func (m *BackendMode) String() string {
	if m == nil || *m == "" {
		return string(BackendModeAuto)
	}
	return string(*m)
}

// Set is part of pflag.Value.
func (m *BackendMode) Set(s string) error {
	parsed, err := ParseBackendMode(s)
	if err != nil {
		return err
	}
	*m = parsed
	return nil
}

// Type is part of pflag.Value.
func (m *BackendMode) Type() string { return "string" }

// NewWithBackend is New running backend's binaries. BackendPath gives exactly New.
func NewWithBackend(protocol Protocol, backend Backend) Interface {
	return newInternal(utilexec.New(), protocol, withCommands(backend.commands(protocol)))
}

// NewBestEffortWithBackend is NewBestEffort running backend's binaries.
func NewBestEffortWithBackend(backend Backend) map[v1.IPFamily]Interface {
	return newBestEffortWithBackend(utilexec.New(), backend)
}

func newBestEffortWithBackend(exec utilexec.Interface, backend Backend) map[v1.IPFamily]Interface {
	out := map[v1.IPFamily]Interface{}
	for family, proto := range map[v1.IPFamily]Protocol{v1.IPv4Protocol: ProtocolIPv4, v1.IPv6Protocol: ProtocolIPv6} {
		r := newInternal(exec, proto, withCommands(backend.commands(proto)))
		if r.Present() == nil {
			out[family] = r
		}
	}
	return out
}

// Detection is what DetectBackend found on the host.
type Detection struct {
	// Backend is BackendLegacy or BackendNFT.
	Backend Backend
	// Reason says, for the log, what decided it.
	Reason string
	// LegacyRules and NFTRules are the rules ("-A" lines) each backend holds over
	// both IP families; -1 when the decision came from kubelet's chains and rules
	// were not counted.
	LegacyRules, NFTRules int
	// Failed lists the save commands that failed, with their errors. Detection
	// carries on without their output, as iptables-wrappers does, so a non-empty
	// list means the decision rests on less than it should.
	Failed []string
}

// detectSaveTimeout bounds each save command detection runs: saving a host's whole
// ruleset takes seconds even when it is huge, and some iptables-nft releases (1.8.0 to
// 1.8.3) can loop forever, which must not hang kube-proxy's start.
const detectSaveTimeout = time.Minute

// kubeletChainRE matches the chains kubelet (1.17 and later) creates in the mangle
// table of the backend it uses: the declared chain in *-save output.
var kubeletChainRE = regexp.MustCompile(`(?m)^:(KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY)`)

// kubeletChain returns the first kubelet chain declared in save output, or "".
func kubeletChain(save []byte) string {
	if m := kubeletChainRE.FindSubmatch(save); m != nil {
		return string(m[1])
	}
	return ""
}

// countRules counts the rules in save output: the lines appending one.
func countRules(save []byte) int {
	n := 0
	for line := range bytes.Lines(save) {
		if len(line) > 0 && line[0] == '-' {
			n++
		}
	}
	return n
}

// DetectBackend decides which backend holds the host's rules, as the
// iptables-wrappers script (v2, the last one that also counts rules) decides, in
// the same order:
//
//  1. kubelet's chain KUBE-IPTABLES-HINT or KUBE-KUBELET-CANARY in iptables-nft's
//     or ip6tables-nft's mangle table: nft. It is checked first because the nft
//     check can ask for the mangle table alone and nft is the common case.
//  2. either chain anywhere in iptables-legacy-save or ip6tables-legacy-save output:
//     legacy. Legacy is saved whole because asking a legacy backend for a table
//     creates the table in the kernel.
//  3. otherwise, whichever backend holds more rules over both families; a tie,
//     including an empty host, is nft.
//
// Every step reads rules only; nothing is created. Both sets of binaries must be
// installed (ChooseBackend checks). It fails, rather than guess, when ctx ends or when
// not one save command of either backend worked (an unprivileged container, say):
// the rules were not looked at.
func DetectBackend(ctx context.Context) (Detection, error) {
	return detectBackend(ctx, utilexec.New())
}

func detectBackend(ctx context.Context, exec utilexec.Interface) (Detection, error) {
	d := Detection{LegacyRules: -1, NFTRules: -1}
	worked := map[Backend]bool{}
	save := func(backend Backend, protocol Protocol, args ...string) []byte {
		_, cmd, _ := backend.commands(protocol)
		var out, stderr bytes.Buffer
		cmdCtx, cancel := context.WithTimeout(ctx, detectSaveTimeout)
		defer cancel()
		c := exec.CommandContext(cmdCtx, cmd, args...)
		c.SetStdout(&out)
		c.SetStderr(&stderr)
		if err := c.Run(); err != nil {
			d.Failed = append(d.Failed, fmt.Sprintf("%s: %v: %s", strings.Join(append([]string{cmd}, args...), " "), err, trimOutput(stderr.Bytes())))
			return nil
		}
		worked[backend] = true
		return out.Bytes()
	}
	// A decision made from commands that did not run is a guess.
	check := func() error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("detecting the iptables backend: %w", err)
		}
		return nil
	}
	families := []Protocol{ProtocolIPv4, ProtocolIPv6}

	for _, p := range families {
		if chain := kubeletChain(save(BackendNFT, p, "-t", string(TableMangle))); chain != "" {
			_, cmd, _ := BackendNFT.commands(p)
			d.Backend, d.Reason = BackendNFT, fmt.Sprintf("kubelet's chain %s is in %s's mangle table", chain, cmd)
			return d, check()
		}
	}
	var legacy [2][]byte
	for i, p := range families {
		legacy[i] = save(BackendLegacy, p)
		if chain := kubeletChain(legacy[i]); chain != "" {
			_, cmd, _ := BackendLegacy.commands(p)
			d.Backend, d.Reason = BackendLegacy, fmt.Sprintf("kubelet's chain %s is in %s's rules (and in no iptables-nft table)", chain, cmd)
			return d, check()
		}
	}
	d.LegacyRules, d.NFTRules = 0, 0
	for i, p := range families {
		d.LegacyRules += countRules(legacy[i])
		d.NFTRules += countRules(save(BackendNFT, p))
	}
	if err := check(); err != nil {
		return d, err
	}
	if !worked[BackendLegacy] && !worked[BackendNFT] {
		return d, fmt.Errorf("detecting the iptables backend: no iptables-legacy-save or iptables-nft-save command worked: %s", strings.Join(d.Failed, "; "))
	}
	if d.LegacyRules > d.NFTRules {
		d.Backend = BackendLegacy
		d.Reason = fmt.Sprintf("no kubelet chain in either backend; iptables-legacy holds more rules (%d) than iptables-nft (%d)", d.LegacyRules, d.NFTRules)
	} else {
		d.Backend = BackendNFT
		d.Reason = fmt.Sprintf("no kubelet chain in either backend; iptables-nft holds at least as many rules (%d) as iptables-legacy (%d), and nft wins a tie", d.NFTRules, d.LegacyRules)
	}
	return d, nil
}

// BackendChoice is what ChooseBackend decided.
type BackendChoice struct {
	// Mode is what was asked for.
	Mode BackendMode
	// Backend is what to run: pass it to NewWithBackend or NewBestEffortWithBackend.
	Backend Backend
	// Reason says why, for the log.
	Reason string
	// Detection is set when detection ran (both backends are installed), also for
	// a forced mode, so that a disagreement can be reported.
	Detection *Detection
}

// ChooseBackend resolves mode into the backend to run, and logs which one and why:
//
//   - legacy or nft: that backend; an error if its binaries are not installed.
//     When both are installed detection runs too, and an error is logged if the
//     host's rules say otherwise (the operator may know better, but must not be
//     surprised).
//   - auto with both backends installed: DetectBackend's answer, or its error: a
//     backend is never guessed from rules that could not be read.
//   - auto with one installed: that one; the other's rules cannot be inspected,
//     which the log says.
//   - auto with neither: BackendPath, the plain names, as New does (a host whose
//     iptables predates the split, or a distribution that ships one variant under
//     the plain names).
func ChooseBackend(ctx context.Context, mode BackendMode) (BackendChoice, error) {
	return chooseBackend(ctx, utilexec.New(), mode)
}

func chooseBackend(ctx context.Context, exec utilexec.Interface, mode BackendMode) (BackendChoice, error) {
	logger := klog.FromContext(ctx)
	mode, err := ParseBackendMode(string(mode))
	if err != nil {
		return BackendChoice{}, err
	}
	missing := map[Backend]error{}
	for _, b := range []Backend{BackendLegacy, BackendNFT} {
		if err := installed(exec, b); err != nil {
			missing[b] = err
		}
	}
	c := BackendChoice{Mode: mode}
	var detectErr error
	if len(missing) == 0 {
		d, err := detectBackend(ctx, exec)
		if err == nil {
			c.Detection = &d
		}
		detectErr = err
	}

	switch mode {
	case BackendModeLegacy, BackendModeNFT:
		c.Backend = Backend(mode)
		if err := missing[c.Backend]; err != nil {
			return BackendChoice{}, fmt.Errorf("iptables backend %q was asked for but is not installed: %w", mode, err)
		}
		c.Reason = "asked for"
		if detectErr != nil {
			logger.Error(detectErr, "Could not check the iptables backend asked for against the host's rules", "backend", c.Backend)
		}
		if c.Detection != nil && c.Detection.Backend != c.Backend {
			logger.Error(nil, "The iptables backend asked for is not the one the host's rules are in; rules will be programmed where the host's own chains are not",
				"backend", c.Backend, "hostBackend", c.Detection.Backend, "hostReason", c.Detection.Reason)
		}
	default:
		switch {
		case detectErr != nil:
			return BackendChoice{}, fmt.Errorf("%w (set the backend explicitly to skip detection)", detectErr)
		case c.Detection != nil:
			c.Backend, c.Reason = c.Detection.Backend, c.Detection.Reason
		case missing[BackendLegacy] == nil:
			c.Backend = BackendLegacy
			c.Reason = fmt.Sprintf("only iptables-legacy is installed, so rules in nf_tables could not be inspected (%v)", missing[BackendNFT])
		case missing[BackendNFT] == nil:
			c.Backend = BackendNFT
			c.Reason = fmt.Sprintf("only iptables-nft is installed, so rules in legacy x_tables could not be inspected (%v)", missing[BackendLegacy])
		default:
			c.Backend = BackendPath
			c.Reason = "neither iptables-legacy nor iptables-nft is installed"
		}
	}
	kv := []any{"backend", c.Backend, "mode", c.Mode, "reason", c.Reason}
	if d := c.Detection; d != nil {
		kv = append(kv, "legacyRules", d.LegacyRules, "nftRules", d.NFTRules)
		if len(d.Failed) > 0 {
			kv = append(kv, "failedCommands", d.Failed)
		}
	}
	logger.Info("Chose the iptables backend", kv...)
	return c, nil
}

// installed reports, as a nil error, whether backend's IPv4 binaries are all in
// PATH. IPv6 ones are left to Present, like a missing ip6tables is for New.
func installed(exec utilexec.Interface, backend Backend) error {
	ipt, save, restore := backend.commands(ProtocolIPv4)
	for _, cmd := range []string{ipt, save, restore} {
		if _, err := exec.LookPath(cmd); err != nil {
			return fmt.Errorf("%s: %w", cmd, err)
		}
	}
	return nil
}

// NewBestEffortEveryBackend returns an Interface for every backend and IP family that
// may hold rules on this host, for removing what was ever written: a cleanup must also
// find what another mode, an older kube-proxy or a host that has since switched
// backends left in the other backend. The nft backend is included wherever its
// binaries work. The legacy backend is included only for a family whose x_tables
// tables the kernel has in use (/proc/net/ip_tables_names or ip6_tables_names lists
// any), since running iptables-legacy on a host that never used it loads the legacy
// modules and creates empty tables there. With neither backend's binaries installed,
// iptables from PATH is used, as NewBestEffort.
func NewBestEffortEveryBackend() []Interface {
	return newBestEffortEveryBackend(utilexec.New(), legacyTablesInUse)
}

func newBestEffortEveryBackend(exec utilexec.Interface, legacyInUse func(Protocol) bool) []Interface {
	var out []Interface
	for _, proto := range []Protocol{ProtocolIPv4, ProtocolIPv6} {
		installed := false
		for _, b := range []Backend{BackendNFT, BackendLegacy} {
			ipt, _, _ := b.commands(proto)
			if _, err := exec.LookPath(ipt); err != nil {
				continue
			}
			installed = true
			// Checked before the binary runs at all: Present would load the
			// legacy modules.
			if b == BackendLegacy && !legacyInUse(proto) {
				continue
			}
			if r := newInternal(exec, proto, withCommands(b.commands(proto))); r.Present() == nil {
				out = append(out, r)
			}
		}
		if !installed {
			if r := newInternal(exec, proto); r.Present() == nil {
				out = append(out, r)
			}
		}
	}
	return out
}

// legacyTablesInUse reports whether the kernel has any x_tables table of protocol's
// family in use, which only happens once something ran iptables-legacy (or an old
// iptables) for that family.
func legacyTablesInUse(proto Protocol) bool {
	file := "/proc/net/ip_tables_names"
	if proto == ProtocolIPv6 {
		file = "/proc/net/ip6_tables_names"
	}
	b, err := os.ReadFile(file)
	return err == nil && len(bytes.TrimSpace(b)) > 0
}
