//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A test mode is what forEachMode names a subtest after. It is kube-proxy's
// --proxy-mode, except for iptables-legacy: iptables mode on the legacy (x_tables)
// backend, which is how kube-proxy runs on hosts whose firewall is in iptables-legacy.
const (
	modeIPTables       = "iptables"
	modeIPTablesLegacy = "iptables-legacy"
	modeNFTables       = "nftables"
	modeIPVS           = "ipvs"
)

// allModes are the modes KUBE_PROXY_E2E_MODES may name, in the order they run.
var allModes = []string{modeIPTables, modeIPTablesLegacy, modeNFTables, modeIPVS}

// defaultModes run when KUBE_PROXY_E2E_MODES is unset. iptables-legacy is left out
// so a host run does what it did before the variable existed: plain iptables mode
// already runs whichever backend the host's iptables is, and a second iptables run
// would double its time. ipvs is in and skips on a kernel without ip_vs.
var defaultModes = []string{modeIPTables, modeNFTables, modeIPVS}

// modesEnv selects the modes to run, comma-separated (e.g. "ipvs" or
// "iptables,iptables-legacy"); the QEMU guest of test/vm runs one mode per process.
const modesEnv = "KUBE_PROXY_E2E_MODES"

// selectedModes parses KUBE_PROXY_E2E_MODES; an unknown name is an error, not a
// silently empty run.
func selectedModes(env string) ([]string, error) {
	if strings.TrimSpace(env) == "" {
		return defaultModes, nil
	}
	var modes []string
	for _, m := range strings.Split(env, ",") {
		m = strings.TrimSpace(m)
		if m == "" {
			continue
		}
		known := false
		for _, k := range allModes {
			known = known || k == m
		}
		if !known {
			return nil, fmt.Errorf("%s: unknown mode %q, want some of %s", modesEnv, m, strings.Join(allModes, ","))
		}
		modes = append(modes, m)
	}
	return modes, nil
}

// proxyMode is the --proxy-mode flag of a test mode.
func proxyMode(mode string) string {
	if mode == modeIPTablesLegacy {
		return modeIPTables
	}
	return mode
}

// usesIPTables reports whether kube-proxy in mode programs iptables rules (ipvs mode
// does, beside IPVS and ip sets).
func usesIPTables(mode string) bool {
	return mode == modeIPTables || mode == modeIPTablesLegacy || mode == modeIPVS
}

// iptablesCmd names the iptables binary the test itself runs in mode ("iptables",
// "iptables-save", "ip6tables-restore", ...): the legacy variant in iptables-legacy
// mode, so that the test reads and flushes the rules kube-proxy wrote.
func iptablesCmd(mode, name string) string {
	if mode != modeIPTablesLegacy {
		return name
	}
	base, rest, _ := strings.Cut(name, "-")
	if rest != "" {
		return base + "-legacy-" + rest
	}
	return base + "-legacy"
}

// modeTools are the binaries each mode needs.
var modeTools = map[string][]string{
	modeIPTables: {"iptables", "iptables-restore", "iptables-save", "ip6tables-restore", "ip6tables-save"},
	modeIPTablesLegacy: {"iptables-legacy", "iptables-legacy-restore", "iptables-legacy-save",
		"ip6tables-legacy", "ip6tables-legacy-restore", "ip6tables-legacy-save"},
	modeNFTables: {"nft"},
	// ipvs mode programs IPVS over netlink but its masquerading, firewall and
	// NodePort matching are iptables rules over ip sets, and the tests read IPVS
	// with ipvsadm.
	modeIPVS: {"iptables", "iptables-restore", "iptables-save", "ip6tables-restore", "ip6tables-save", "ipset", "ipvsadm"},
}

// requireMode skips t with the reason when the host cannot run mode.
func requireMode(t *testing.T, mode string) {
	t.Helper()
	for _, tool := range modeTools[mode] {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s mode needs %s: %v", mode, tool, err)
		}
	}
	switch mode {
	case modeIPVS:
		if err := haveIPVS(); err != nil {
			t.Skipf("ipvs mode needs the kernel's IPVS: %v", err)
		}
	case modeIPTablesLegacy:
		// A kernel built without x_tables' legacy tables (or a module that cannot be
		// loaded) fails every iptables-legacy call; ask once in a throwaway namespace.
		ns := "kpe2e-legacy-" + randomHex(3)
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v\n%s", ns, err, out)
		}
		defer func() { _ = exec.Command("ip", "netns", "del", ns).Run() }()
		if out, err := nsExec(ns, "iptables-legacy", "-t", "nat", "-L", "-n"); err != nil {
			t.Skipf("iptables-legacy does not work on this kernel: %v: %s", err, strings.TrimSpace(out))
		}
	}
}

// haveIPVS reports, as a nil error, whether the kernel has IPVS, loading ip_vs if
// needed: /proc/net/ip_vs exists once the module is in.
func haveIPVS() error {
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		return nil
	}
	out, merr := exec.Command("modprobe", "ip_vs").CombinedOutput()
	if _, err := os.Stat("/proc/net/ip_vs"); err != nil {
		return fmt.Errorf("/proc/net/ip_vs is absent after modprobe ip_vs (%v: %s)", merr, strings.TrimSpace(string(out)))
	}
	return nil
}

func forEachMode(t *testing.T, fn func(t *testing.T, mode string)) {
	requireRoot(t)
	modes, err := selectedModes(os.Getenv(modesEnv))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			requireMode(t, mode)
			fn(t, mode)
		})
	}
}

func TestSelectedModes(t *testing.T) {
	for _, tc := range []struct {
		env     string
		want    []string
		wantErr bool
	}{
		{"", defaultModes, false},
		{"ipvs", []string{"ipvs"}, false},
		{" iptables , iptables-legacy,", []string{"iptables", "iptables-legacy"}, false},
		{"iptables,ipvs,nftables,iptables-legacy", []string{"iptables", "ipvs", "nftables", "iptables-legacy"}, false},
		{"userspace", nil, true},
		{"iptables,nft", nil, true},
	} {
		got, err := selectedModes(tc.env)
		if (err != nil) != tc.wantErr || strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("selectedModes(%q) = %v, %v; want %v, error %v", tc.env, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestIPTablesCmd(t *testing.T) {
	for _, tc := range []struct{ mode, name, want string }{
		{modeIPTables, "iptables-save", "iptables-save"},
		{modeIPVS, "ip6tables-restore", "ip6tables-restore"},
		{modeIPTablesLegacy, "iptables", "iptables-legacy"},
		{modeIPTablesLegacy, "iptables-save", "iptables-legacy-save"},
		{modeIPTablesLegacy, "ip6tables-restore", "ip6tables-legacy-restore"},
	} {
		if got := iptablesCmd(tc.mode, tc.name); got != tc.want {
			t.Errorf("iptablesCmd(%s, %s) = %s, want %s", tc.mode, tc.name, got, tc.want)
		}
	}
	for mode, want := range map[string]string{modeIPTables: "iptables", modeIPTablesLegacy: "iptables", modeNFTables: "nftables", modeIPVS: "ipvs"} {
		if got := proxyMode(mode); got != want {
			t.Errorf("proxyMode(%s) = %s, want %s", mode, got, want)
		}
	}
}

func TestSyncedFamilies(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     string
	}{
		{"none yet", "# HELP x\nkubeproxy_sync_proxy_rules_duration_seconds_count{ip_family=\"IPv4\"} 3\n", ""},
		{"one", "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} 1.7645e+09\n", "IPv4"},
		{"both", "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv6\"} 1.7645e+09\nkubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} 1.7645e+09\n", "IPv4,IPv6"},
		{"zero is not synced", "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv6\"} 0\n", ""},
	} {
		got := syncedFamilies(tc.in)
		var fams []string
		for _, f := range []string{"IPv4", "IPv6"} {
			if got[f] {
				fams = append(fams, f)
			}
		}
		if strings.Join(fams, ",") != tc.want {
			t.Errorf("%s: syncedFamilies = %v, want %s", tc.name, got, tc.want)
		}
	}
}

func TestMetricByFamily(t *testing.T) {
	body := `# TYPE kubeproxy_sync_full_proxy_rules_duration_seconds histogram
kubeproxy_sync_full_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.001"} 0
kubeproxy_sync_full_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 20.5
kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"} 2
kubeproxy_sync_full_proxy_rules_duration_seconds_sum{ip_family="IPv6"} 0.25
kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv6"} 1
`
	sums := metricByFamily(body, fullSyncMetric+"_sum")
	counts := metricByFamily(body, fullSyncMetric+"_count")
	if sums["IPv4"] != 20.5 || sums["IPv6"] != 0.25 || counts["IPv4"] != 2 || counts["IPv6"] != 1 || len(sums) != 2 {
		t.Errorf("sums %v counts %v", sums, counts)
	}
	if got := metricByFamily(body, fullSyncMetric); len(got) != 0 {
		t.Errorf("the bare histogram name matched its series: %v", got)
	}
}
