package validation

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	netutils "k8s.io/utils/net"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	configv1alpha2 "k8s.io/kube-proxy/config/v1alpha2"
	"k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// Warnings lists settings of a valid configuration that are probably not what the
// user meant. They never stop kube-proxy.
func Warnings(cfg *config.KubeProxyConfiguration) []string {
	var w []string
	if cfg.Mode == config.ProxyModeIPVS {
		w = append(w, "mode: the ipvs proxy mode is deprecated (it is planned to be disabled by default in Kubernetes 1.40 and removed in 1.43); consider nftables")
	}
	if len(cfg.NodeIPOverride) > 0 && cfg.BindAddress != "" && cfg.BindAddress != cfg.NodeIPOverride[0] {
		if ip := netutils.ParseIPSloppy(cfg.BindAddress); ip != nil && !ip.IsUnspecified() {
			w = append(w, fmt.Sprintf("bindAddress %q is ignored: nodeIPOverride %v takes precedence", cfg.BindAddress, cfg.NodeIPOverride))
		}
	}
	return w
}

// Defaults that upstream gives each v1alpha1 backend block, to tell a block that
// disagrees with the active one from a block left at its default.
var v1alpha1SyncDefaults = map[config.ProxyMode][2]time.Duration{
	config.ProxyModeIPTables: {30 * time.Second, time.Second},
	config.ProxyModeIPVS:     {30 * time.Second, 0},
	config.ProxyModeNFTables: {30 * time.Second, time.Second},
}

// LossWarningsV1alpha1 lists what reading in (as decoded, before defaulting)
// into the internal form throws away. v1alpha1 has per-backend syncPeriod,
// minSyncPeriod and masqueradeAll where the internal form (and v1alpha2) has one
// of each; the rule, upstream's, is that the block of the configured mode wins
// (ipvs.* in ipvs mode, nftables.* in nftables mode, iptables.* otherwise). A
// value set in another block that differs from the winning one is reported,
// since the user probably expected it to apply.
func LossWarningsV1alpha1(in *configv1alpha1.KubeProxyConfiguration) []string {
	type block struct {
		name          string
		sync, minSync time.Duration
		masqAll       bool
		hasMasqAll    bool
	}
	blocks := map[config.ProxyMode]block{
		config.ProxyModeIPTables: {"iptables", in.IPTables.SyncPeriod.Duration, in.IPTables.MinSyncPeriod.Duration, in.IPTables.MasqueradeAll, true},
		config.ProxyModeIPVS:     {"ipvs", in.IPVS.SyncPeriod.Duration, in.IPVS.MinSyncPeriod.Duration, false, false},
		config.ProxyModeNFTables: {"nftables", in.NFTables.SyncPeriod.Duration, in.NFTables.MinSyncPeriod.Duration, in.NFTables.MasqueradeAll, true},
	}
	mode := config.ProxyMode(in.Mode)
	if _, ok := blocks[mode]; !ok {
		mode = config.ProxyModeIPTables
	}
	active := blocks[mode]
	effective := func(v, def time.Duration) time.Duration {
		if v == 0 {
			return def
		}
		return v
	}
	activeSync := effective(active.sync, v1alpha1SyncDefaults[mode][0])
	activeMin := effective(active.minSync, v1alpha1SyncDefaults[mode][1])
	// ipvs mode reads masqueradeAll from the iptables block.
	masqSource := blocks[config.ProxyModeIPTables]
	if mode == config.ProxyModeNFTables {
		masqSource = active
	}

	var w []string
	for _, m := range []config.ProxyMode{config.ProxyModeIPTables, config.ProxyModeIPVS, config.ProxyModeNFTables} {
		b := blocks[m]
		if m == mode {
			continue
		}
		if b.sync != 0 && b.sync != activeSync {
			w = append(w, fmt.Sprintf("%s.syncPeriod (%s) is ignored in %s mode: %s.syncPeriod (%s) applies, and becomes the single syncPeriod of v1alpha2",
				b.name, b.sync, mode, active.name, activeSync))
		}
		if b.minSync != 0 && b.minSync != activeMin {
			w = append(w, fmt.Sprintf("%s.minSyncPeriod (%s) is ignored in %s mode: %s.minSyncPeriod (%s) applies, and becomes the single minSyncPeriod of v1alpha2",
				b.name, b.minSync, mode, active.name, activeMin))
		}
		if b.hasMasqAll && b.name != masqSource.name && b.masqAll && !masqSource.masqAll {
			w = append(w, fmt.Sprintf("%s.masqueradeAll (true) is ignored in %s mode: %s.masqueradeAll (false) applies, and becomes linux.masqueradeAll in v1alpha2",
				b.name, mode, masqSource.name))
		}
	}
	if in.PortRange != "" {
		w = append(w, fmt.Sprintf("portRange (%q) is ignored: it belonged to the removed userspace proxy, and v1alpha2 drops it", in.PortRange))
	}
	return w
}

// EncodingWarnings lists what writing cfg in version gv loses, so that a caller
// converting a configuration can say so.
func EncodingWarnings(cfg *config.KubeProxyConfiguration, gv schema.GroupVersion) []string {
	var w []string
	switch gv {
	case configv1alpha1.SchemeGroupVersion:
		if len(cfg.NodeIPOverride) > 1 {
			w = append(w, fmt.Sprintf("nodeIPOverride %v: v1alpha1 holds only the primary IP (bindAddress); %s is dropped", cfg.NodeIPOverride, cfg.NodeIPOverride[1]))
		}
		if cfg.IPFamilyPolicy != "" && cfg.IPFamilyPolicy != config.IPFamilyPolicyPreferDualStack {
			w = append(w, fmt.Sprintf("ipFamilyPolicy %s: v1alpha1 cannot express it and always behaves as PreferDualStack", cfg.IPFamilyPolicy))
		}
		if cfg.ConfigHardFail {
			w = append(w, "configHardFail true: v1alpha1 cannot express it; v1alpha1 files are read leniently")
		}
		if sl := cfg.SocketLB; sl != (config.KubeProxySocketLBConfiguration{}) {
			w = append(w, fmt.Sprintf("socketLB (enabled %t, cgroupPath %q): v1alpha1 cannot express it; pass --socket-lb and --socket-lb-cgroup-path with that file", sl.Enabled, sl.CgroupPath))
		}
		if ipvs, ipt := cfg.IPVS.MasqueradeBit, cfg.IPTables.MasqueradeBit; ipvs != nil && (ipt == nil || *ipvs != *ipt) {
			if cfg.Mode == config.ProxyModeIPVS {
				w = append(w, fmt.Sprintf("iptables.masqueradeBit %s is replaced by ipvs.masqueradeBit %d: v1alpha1 keeps one bit for both, and ipvs is the active mode", bitString(ipt), *ipvs))
			} else {
				w = append(w, fmt.Sprintf("ipvs.masqueradeBit %d is dropped: v1alpha1 keeps one bit for iptables and ipvs, and iptables.masqueradeBit (%s) is kept", *ipvs, bitString(ipt)))
			}
		}
	case configv1alpha2.SchemeGroupVersion:
		ip := netutils.ParseIPSloppy(cfg.BindAddress)
		switch {
		case ip == nil:
		case ip.IsUnspecified() && ip.To4() == nil:
			w = append(w, fmt.Sprintf("bindAddress %q is dropped: v1alpha2 has no way to say \"no node IP override, IPv6 servers\"; set healthzBindAddress and metricsBindAddress explicitly", cfg.BindAddress))
		case !ip.IsUnspecified() && len(cfg.NodeIPOverride) > 0 && cfg.NodeIPOverride[0] != cfg.BindAddress:
			w = append(w, fmt.Sprintf("bindAddress %q is dropped in favour of nodeIPOverride %v", cfg.BindAddress, cfg.NodeIPOverride))
		}
	}
	return w
}

func bitString(b *int32) string {
	if b == nil {
		return "(unset)"
	}
	return fmt.Sprint(*b)
}
