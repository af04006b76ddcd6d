package app

// The kernel a proxy mode needs, decided here without touching the host: which kernel
// facilities each Linux mode relies on, and, given what a probe says the running kernel
// has, whether to refuse the mode and with which words. The probe is thin and
// OS-specific (kernelcheck_linux.go); this part is platform-neutral so its decisions are
// unit-tested with a fake. docs/kernels.md gives the evidence for every entry.

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// kernelFeature is one kernel facility a mode relies on.
type kernelFeature struct {
	// what it is and what the mode uses it for, as the refusal names it.
	what string
	// modules are the names it has been built as, any one of which provides it
	// (loaded, built in, or installed for loading); names changed across releases.
	modules []string
	// since is the Linux release that added it.
	since string
}

// kernelVersionGate is a minimum release that stands for something a probe cannot see.
type kernelVersionGate struct {
	min  string
	why  string
	skip string // environment variable that disables the gate, "" for none
}

// kernelRequirements lists what each mode needs of the kernel. Only what the mode uses
// for every Service is listed (a facility only some Services need, such as xt_recent for
// ClientIP affinity, would refuse nodes that never use it); facilities that later
// releases merged into another module (nft_counter, nft_lookup into nf_tables) are
// named by a module that exists in every release.
var kernelRequirements = map[kubeproxyconfig.ProxyMode]struct {
	features []kernelFeature
	gate     *kernelVersionGate
}{
	kubeproxyconfig.ProxyModeNFTables: {
		features: []kernelFeature{
			{"nf_tables (the nftables netlink API)", []string{"nf_tables"}, "3.13"},
			{"nft_ct (ct state / ct status matches)", []string{"nft_ct"}, "3.13"},
			{"nft_nat (dnat to endpoints)", []string{"nft_nat"}, "3.13"},
			{"nft_chain_nat (nat hook chains)", []string{"nft_chain_nat", "nft_chain_nat_ipv4"}, "3.13"},
			{"nft_masq (masquerade)", []string{"nft_masq", "nft_masq_ipv4"}, "3.18"},
			{"nft_numgen (numgen random: endpoint choice)", []string{"nft_numgen"}, "4.9"},
			{"nft_fib_ipv4 (fib saddr/daddr type local)", []string{"nft_fib_ipv4"}, "4.10"},
			{"nft_reject_ipv4 (reject for Services without endpoints)", []string{"nft_reject_ipv4"}, "3.14"},
		},
		// Upstream's gate, kept: rules this mode writes can make an nft older than
		// 1.0.1 unusable, and nothing in the kernel says which nft the host has; a
		// 5.13 kernel comes with distributions whose nft is 1.0.1 or later.
		gate: &kernelVersionGate{min: "5.13", why: "a host nft of 1.0.1 or later (the release stands for the nft the distribution ships, as upstream checks: an older nft parses every table and can break on rules a newer one wrote, issue 122743)",
			skip: "KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK"},
	},
	kubeproxyconfig.ProxyModeIPTables: {
		features: []kernelFeature{
			{"xt_comment (-m comment on every rule)", []string{"xt_comment"}, "2.6"},
			{"xt_conntrack (-m conntrack --ctstate)", []string{"xt_conntrack"}, "2.6"},
			{"xt_addrtype (-m addrtype --dst-type LOCAL: NodePorts)", []string{"xt_addrtype", "ipt_addrtype"}, "2.6.39"},
			{"xt_mark (-m mark / -j MARK: masquerade marking)", []string{"xt_mark"}, "2.6"},
			{"xt_statistic (-m statistic: endpoint choice)", []string{"xt_statistic"}, "2.6.18"},
			{"xt_nat (-j DNAT)", []string{"xt_nat"}, "3.7"},
			{"xt_MASQUERADE (-j MASQUERADE)", []string{"xt_MASQUERADE", "ipt_MASQUERADE"}, "2.6"},
			{"ipt_REJECT (-j REJECT for Services without endpoints)", []string{"ipt_REJECT"}, "2.6"},
		},
	},
	kubeproxyconfig.ProxyModeIPVS: {
		features: []kernelFeature{
			{"ip_vs (IPVS virtual servers)", []string{"ip_vs"}, "2.6"},
			{"ip_set (the KUBE-* ip sets)", []string{"ip_set"}, "2.6.39"},
			{"xt_set (-m set matches on those sets)", []string{"xt_set"}, "2.6.39"},
		},
	},
}

// kernelInfo is what the probe says about the running kernel.
type kernelInfo interface {
	// Release is the running kernel's release (uname -r).
	Release() (string, error)
	// HasModule reports whether the kernel has the module loaded, built in, or
	// installed for loading. errKernelModulesUnknown means it cannot tell (a
	// container without /lib/modules): the mode is then not refused for it.
	HasModule(name string) (bool, error)
}

// errKernelModulesUnknown says the probe cannot tell whether a module exists.
var errKernelModulesUnknown = errors.New("cannot tell which kernel modules exist")

// checkKernelFor refuses mode when the kernel lacks a facility it needs, naming every
// missing one (and the release that added it). It does not refuse for what the probe
// cannot tell. lookupEnv reads the gate's skip variable.
func checkKernelFor(mode kubeproxyconfig.ProxyMode, k kernelInfo, lookupEnv func(string) string) (unknown []string, err error) {
	req, ok := kernelRequirements[mode]
	if !ok || k == nil {
		return nil, nil
	}
	release, relErr := k.Release()
	var missing []string
	for _, f := range req.features {
		found, known := false, true
		for _, m := range f.modules {
			has, err := k.HasModule(m)
			if err != nil {
				known = false
				continue
			}
			if has {
				found = true
				break
			}
		}
		switch {
		case found:
		case !known:
			unknown = append(unknown, f.modules[0])
		default:
			missing = append(missing, fmt.Sprintf("%s, in Linux since %s", f.what, f.since))
		}
	}
	if g := req.gate; g != nil && (g.skip == "" || lookupEnv(g.skip) == "") {
		if relErr != nil {
			unknown = append(unknown, "kernel release")
		} else if v, err := parseKernelRelease(release); err != nil {
			unknown = append(unknown, "kernel release")
		} else if v.LessThan(version.MustParseGeneric(g.min)) {
			msg := fmt.Sprintf("Linux %s or later for %s", g.min, g.why)
			if g.skip != "" {
				msg += fmt.Sprintf("; set %s to skip this check", g.skip)
			}
			missing = append(missing, msg)
		}
	}
	if len(missing) == 0 {
		return unknown, nil
	}
	if relErr != nil {
		release = "(release unknown)"
	}
	return unknown, fmt.Errorf("kube-proxy in %s mode cannot run on kernel %s, which lacks: %s",
		mode, release, strings.Join(missing, "; "))
}

// parseKernelRelease reads "major.minor[.patch]" from the front of a release such as
// "5.10.0-46-cloud-amd64" or "6.12.117+deb12-cloud-amd64".
func parseKernelRelease(release string) (*version.Version, error) {
	end := 0
	for end < len(release) && (release[end] == '.' || release[end] >= '0' && release[end] <= '9') {
		end++
	}
	v, err := version.ParseGeneric(strings.TrimRight(release[:end], "."))
	if err != nil {
		return nil, fmt.Errorf("kernel release %q: %w", release, err)
	}
	return v, nil
}
