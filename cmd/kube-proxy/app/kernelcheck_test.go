package app

import (
	"errors"
	"strings"
	"testing"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// fakeKernel is a kernel with a release and a set of modules; unknownModules makes
// every module not in the set unknowable (a container without /lib/modules).
type fakeKernel struct {
	release        string
	releaseErr     error
	modules        map[string]bool
	unknownModules bool
}

func (f *fakeKernel) Release() (string, error) { return f.release, f.releaseErr }
func (f *fakeKernel) HasModule(name string) (bool, error) {
	if f.modules[name] {
		return true, nil
	}
	if f.unknownModules {
		return false, errKernelModulesUnknown
	}
	return false, nil
}

// allModules is every module any mode names (first name of each feature).
func allModules(except ...string) map[string]bool {
	m := map[string]bool{}
	for _, req := range kernelRequirements {
		for _, f := range req.features {
			m[f.modules[0]] = true
		}
	}
	for _, e := range except {
		delete(m, e)
	}
	return m
}

func TestCheckKernelFor(t *testing.T) {
	noEnv := func(string) string { return "" }
	skipEnv := func(k string) string {
		if k == "KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK" {
			return "1"
		}
		return ""
	}
	older := allModules("nft_chain_nat", "nft_masq")
	older["nft_chain_nat_ipv4"], older["nft_masq_ipv4"] = true, true
	for _, tc := range []struct {
		name        string
		mode        kubeproxyconfig.ProxyMode
		kernel      *fakeKernel
		env         func(string) string
		wantErr     []string // substrings, all required; nil: no error
		notInErr    []string
		wantUnknown []string
	}{
		{name: "nftables on 6.1 with everything", mode: kubeproxyconfig.ProxyModeNFTables,
			kernel: &fakeKernel{release: "6.1.0-56-cloud-amd64", modules: allModules()}},
		{name: "nftables on 5.13 exactly", mode: kubeproxyconfig.ProxyModeNFTables,
			kernel: &fakeKernel{release: "5.13.0", modules: allModules()}},
		{name: "nftables on 5.10 refused by the gate, naming nft", mode: kubeproxyconfig.ProxyModeNFTables,
			kernel:   &fakeKernel{release: "5.10.0-46-cloud-amd64", modules: allModules()},
			wantErr:  []string{"nftables mode", "5.10.0-46-cloud-amd64", "Linux 5.13 or later", "nft of 1.0.1", "KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK"},
			notInErr: []string{"nft_numgen"}},
		{name: "nftables on 5.10 with the gate skipped", mode: kubeproxyconfig.ProxyModeNFTables, env: skipEnv,
			kernel: &fakeKernel{release: "5.10.0-46-cloud-amd64", modules: allModules()}},
		{name: "nftables without numgen names it", mode: kubeproxyconfig.ProxyModeNFTables,
			kernel:   &fakeKernel{release: "6.1.0-56-cloud-amd64", modules: allModules("nft_numgen")},
			wantErr:  []string{"nft_numgen (numgen random: endpoint choice), in Linux since 4.9"},
			notInErr: []string{"5.13", "nft_fib"}},
		{name: "two missing, both named", mode: kubeproxyconfig.ProxyModeNFTables,
			kernel:  &fakeKernel{release: "6.1.0", modules: allModules("nft_numgen", "nft_fib_ipv4")},
			wantErr: []string{"nft_numgen", "nft_fib_ipv4"}},
		{name: "the older module names count", mode: kubeproxyconfig.ProxyModeNFTables, env: skipEnv,
			kernel: &fakeKernel{release: "4.19.0", modules: older}},
		{name: "no nf_tables at all", mode: kubeproxyconfig.ProxyModeNFTables,
			kernel:  &fakeKernel{release: "6.8.0-151-generic", modules: allModules("nf_tables")},
			wantErr: []string{"nf_tables (the nftables netlink API)"}},
		{name: "modules unknowable: not refused, reported unknown", mode: kubeproxyconfig.ProxyModeNFTables,
			kernel:      &fakeKernel{release: "6.18.44-fc", modules: map[string]bool{"nf_tables": true}, unknownModules: true},
			wantUnknown: []string{"nft_ct", "nft_nat"}},
		{name: "release unreadable: gate unknown, not refused", mode: kubeproxyconfig.ProxyModeNFTables,
			kernel:      &fakeKernel{releaseErr: errors.New("no /proc"), modules: allModules()},
			wantUnknown: []string{"kernel release"}},
		{name: "release unreadable and a module missing", mode: kubeproxyconfig.ProxyModeNFTables,
			kernel:  &fakeKernel{releaseErr: errors.New("no /proc"), modules: allModules("nft_ct")},
			wantErr: []string{"(release unknown)", "nft_ct"}},
		{name: "iptables without statistic", mode: kubeproxyconfig.ProxyModeIPTables,
			kernel:  &fakeKernel{release: "5.10.0", modules: allModules("xt_statistic")},
			wantErr: []string{"iptables mode", "xt_statistic (-m statistic: endpoint choice)"}},
		{name: "iptables has no version gate", mode: kubeproxyconfig.ProxyModeIPTables,
			kernel: &fakeKernel{release: "4.19.0", modules: allModules()}},
		{name: "ipvs without ip_vs", mode: kubeproxyconfig.ProxyModeIPVS,
			kernel:  &fakeKernel{release: "6.18.44", modules: allModules("ip_vs")},
			wantErr: []string{"ipvs mode", "ip_vs (IPVS virtual servers)"}},
		{name: "a mode without requirements", mode: kubeproxyconfig.ProxyModeKernelspace,
			kernel: &fakeKernel{release: "1.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = noEnv
			}
			unknown, err := checkKernelFor(tc.mode, tc.kernel, env)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("unexpected refusal: %v", err)
			case tc.wantErr != nil && err == nil:
				t.Fatalf("not refused; want an error naming %q", tc.wantErr)
			}
			if err != nil {
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
				for _, w := range tc.notInErr {
					if strings.Contains(err.Error(), w) {
						t.Errorf("error %q names %q, which is not missing", err, w)
					}
				}
			}
			for _, w := range tc.wantUnknown {
				found := false
				for _, u := range unknown {
					found = found || u == w
				}
				if !found {
					t.Errorf("unknown = %v, want it to include %s", unknown, w)
				}
			}
		})
	}
}

func TestCheckKernelForNilProbe(t *testing.T) {
	if _, err := checkKernelFor(kubeproxyconfig.ProxyModeNFTables, nil, func(string) string { return "" }); err != nil {
		t.Errorf("a platform without a probe must not refuse: %v", err)
	}
}

func TestParseKernelRelease(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"5.10.0-46-cloud-amd64", "5.10.0"},
		{"6.12.117+deb12-cloud-amd64", "6.12.117"},
		{"6.8.0-151-generic", "6.8.0"},
		{"6.18.44-fc-v657", "6.18.44"},
		{"5.13", "5.13"},
	} {
		v, err := parseKernelRelease(tc.in)
		if err != nil || v.String() != tc.want {
			t.Errorf("parseKernelRelease(%q) = %v, %v; want %s", tc.in, v, err, tc.want)
		}
	}
	if _, err := parseKernelRelease("garbage"); err == nil {
		t.Error("parseKernelRelease(garbage) did not fail")
	}
}
