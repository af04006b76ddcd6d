package winkernel

import (
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
	hcntest "k8s.io/kube-proxy/pkg/proxy/winkernel/testing"
)

func TestEnum(t *testing.T) {
	for p, want := range map[v1.Protocol]uint16{v1.ProtocolTCP: 6, v1.ProtocolUDP: 17, v1.ProtocolSCTP: 132, "ICMP": 0, "": 0} {
		if got := Enum(p); got != want {
			t.Errorf("Enum(%q) = %d, want %d", p, got, want)
		}
	}
}

func TestErrorPredicates(t *testing.T) {
	tests := []struct {
		name                string
		err                 error
		notRunning, already bool
		label               string
	}{
		{name: "nil", err: nil, label: "none"},
		{name: "HNS not running", err: hcntest.HNSNotRunningError, notRunning: true, label: "other"},
		{name: "not running in a wrapped message", err: errors.New("hnsCall failed in Win32: (0x6b5)"), notRunning: true, label: "other"},
		{name: "port already exists", err: hcnapi.NewError(hcnapi.KindPortAlreadyExists, "The specified port already exists."), already: true, label: "port_already_exists"},
		{name: "ERROR_ALREADY_EXISTS in the text", err: errors.New("Cannot create a file when that file already exists. (0xb7)"), already: true, label: "other"},
		{name: "network not found", err: hcnapi.NewError(hcnapi.KindNetworkNotFound, "not found"), label: "network_not_found"},
		{name: "not implemented", err: hcnapi.NewError(hcnapi.KindNotImplemented, "E_NOTIMPL"), label: "not_implemented"},
		{name: "invalid IP", err: hcnapi.NewError(hcnapi.KindInvalidIP, "bad"), label: "invalid_ip"},
		{name: "other", err: errors.New("boom"), label: "other"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsHnsNotRunningError(tc.err); got != tc.notRunning {
				t.Errorf("IsHnsNotRunningError = %v, want %v", got, tc.notRunning)
			}
			if got := IsPolicyAlreadyExists(tc.err); got != tc.already {
				t.Errorf("IsPolicyAlreadyExists = %v, want %v", got, tc.already)
			}
			if got := classifyLBError(tc.err); got != tc.label {
				t.Errorf("classifyLBError = %q, want %q", got, tc.label)
			}
		})
	}
}

func TestConjureMAC(t *testing.T) {
	for ip, want := range map[string]string{
		"10.244.2.7":  "02-11-0a-f4-02-07",
		"fd00::1:2:3": "02-11-03-00-02-00",
		"garbage":     "02-11-22-33-44-55",
	} {
		if got := conjureMAC("02-11", net.ParseIP(ip)); got != want {
			t.Errorf("conjureMAC(%s) = %s, want %s", ip, got, want)
		}
	}
}

func TestProviderAddress(t *testing.T) {
	subnets, err := parseRemoteSubnets(&hcnapi.Network{Name: "n", RemoteSubnets: []hcnapi.RemoteSubnet{
		{DestinationPrefix: "10.244.1.0/24", ProviderAddress: "192.168.0.3"},
		{DestinationPrefix: "10.244.0.0/16", ProviderAddress: "192.168.0.9"},
		{DestinationPrefix: "not a prefix", ProviderAddress: "192.168.0.4"},
	}})
	if err == nil {
		t.Errorf("parseRemoteSubnets accepted an invalid prefix")
	}
	for ip, want := range map[string]string{
		"10.244.1.5":  "192.168.0.9", // the later policy wins, as upstream
		"10.244.7.5":  "192.168.0.9",
		"192.168.0.4": "192.168.0.4", // a provider address maps to itself
		"203.0.113.1": "",
		"bogus":       "",
	} {
		if got := providerAddress(subnets, ip); got != want {
			t.Errorf("providerAddress(%s) = %q, want %q", ip, got, want)
		}
	}
}

type compat struct{ err error }

func (c compat) IsCompatible() error { return c.err }

func TestCanUseWinKernelProxier(t *testing.T) {
	if ok, err := CanUseWinKernelProxier(compat{}); !ok || err != nil {
		t.Errorf("compatible host: %v, %v", ok, err)
	}
	if ok, err := CanUseWinKernelProxier(compat{errors.New("no")}); ok || err == nil {
		t.Errorf("incompatible host: %v, %v", ok, err)
	}
	if runtime.GOOS != "windows" {
		if err := (WindowsKernelCompatTester{}).IsCompatible(); err == nil {
			t.Errorf("WindowsKernelCompatTester found HNS on %s", runtime.GOOS)
		}
		if (DualStackCompatTester{}).DualStackCompatible("cbr0") {
			t.Errorf("DualStackCompatTester found dual-stack on %s", runtime.GOOS)
		}
		if CleanupLeftovers() {
			t.Errorf("CleanupLeftovers failed on %s, where there is nothing to clean", runtime.GOOS)
		}
		if _, err := NewProxier(&kubeproxyconfig.KubeProxyConfiguration{}, v1.IPv4Protocol, testNode, nil, nil, nil); err == nil {
			t.Errorf("NewProxier succeeded on %s", runtime.GOOS)
		}
		if _, err := NewDualStackProxier(&kubeproxyconfig.KubeProxyConfiguration{}, testNode, nil, nil, nil); err == nil {
			t.Errorf("NewDualStackProxier succeeded on %s", runtime.GOOS)
		}
	}
}

func TestDualStackCompatible(t *testing.T) {
	tests := []struct {
		name    string
		netType string
		noDual  bool
		network string
		want    bool
	}{
		{name: "L2Bridge", netType: hcnapi.NetworkTypeL2Bridge, network: "cbr0", want: true},
		{name: "overlay is single-stack", netType: "Overlay", network: "cbr0"},
		{name: "HNS without dual-stack", netType: hcnapi.NetworkTypeL2Bridge, noDual: true, network: "cbr0"},
		{name: "unknown network", netType: hcnapi.NetworkTypeL2Bridge, network: "other"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			feats := hcntest.AllFeatures()
			feats.IPv6DualStack = !tc.noDual
			h := hcntest.NewFake(feats)
			h.AddNetwork("cbr0", tc.netType)
			if got := dualStackCompatible(h, tc.network); got != tc.want {
				t.Errorf("dualStackCompatible = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("network name from KUBE_NETWORK", func(t *testing.T) {
		t.Setenv("KUBE_NETWORK", "cbr0")
		h := hcntest.NewFake(hcntest.AllFeatures())
		h.AddNetwork("cbr0", hcnapi.NetworkTypeL2Bridge)
		if !dualStackCompatible(h, "") {
			t.Errorf("KUBE_NETWORK not used")
		}
		t.Setenv("KUBE_NETWORK", "")
		if dualStackCompatible(h, "") {
			t.Errorf("no network name, but compatible")
		}
	})
}

func TestCleanupLoadBalancers(t *testing.T) {
	h := hcntest.NewFake(hcntest.AllFeatures())
	for range 3 {
		h.AddLoadBalancer(hcnapi.LoadBalancer{PortMappings: []hcnapi.PortMapping{{Protocol: 6}}})
	}
	h.FailNext(hcntest.OpDeleteLoadBalancer, errors.New("boom"))
	if !cleanupLoadBalancers(h) {
		t.Errorf("a failed deletion was not reported")
	}
	if n := len(h.LoadBalancers()); n != 1 {
		t.Errorf("%d load balancers left, want the one that failed", n)
	}
	if cleanupLoadBalancers(h) || len(h.LoadBalancers()) != 0 {
		t.Errorf("second cleanup: %d left", len(h.LoadBalancers()))
	}
	h.SetRunning(false)
	if !cleanupLoadBalancers(h) {
		t.Errorf("HNS down was not reported")
	}
}

func TestNewProxierChecks(t *testing.T) {
	f := families[0]
	tests := []struct {
		name     string
		netType  string
		features func(*hcnapi.Features)
		config   func(*kubeproxyconfig.KubeProxyConfiguration)
		env      string
		noMAC    bool
		wantErr  string
	}{
		{name: "L2Bridge", netType: hcnapi.NetworkTypeL2Bridge},
		{name: "overlay", netType: "Overlay", config: func(c *kubeproxyconfig.KubeProxyConfiguration) { c.Winkernel.SourceVip = f.sourceVIP }},
		{name: "no HNS v2 API", netType: hcnapi.NetworkTypeL2Bridge, features: func(x *hcnapi.Features) { x.APIV2 = false }, wantErr: "API V2"},
		{name: "network from KUBE_NETWORK", netType: hcnapi.NetworkTypeL2Bridge, env: testNetwork,
			config: func(c *kubeproxyconfig.KubeProxyConfiguration) { c.Winkernel.NetworkName = "" }},
		{name: "no network name", netType: hcnapi.NetworkTypeL2Bridge,
			config: func(c *kubeproxyconfig.KubeProxyConfiguration) { c.Winkernel.NetworkName = "" }, wantErr: "KUBE_NETWORK"},
		{name: "DSR not supported", netType: hcnapi.NetworkTypeL2Bridge, features: func(x *hcnapi.Features) { x.DSR = false },
			config: func(c *kubeproxyconfig.KubeProxyConfiguration) { c.Winkernel.EnableDSR = true }, wantErr: "DSR"},
		{name: "overlay without --source-vip", netType: "Overlay", wantErr: "--source-vip"},
		{name: "overlay with a bad --source-vip", netType: "Overlay", wantErr: "not an IP",
			config: func(c *kubeproxyconfig.KubeProxyConfiguration) { c.Winkernel.SourceVip = "10.0.0.x" }},
		{name: "overlay without remote subnet support", netType: "Overlay", features: func(x *hcnapi.Features) { x.RemoteSubnet = false },
			config: func(c *kubeproxyconfig.KubeProxyConfiguration) { c.Winkernel.SourceVip = f.sourceVIP }, wantErr: "remote subnets"},
		{name: "overlay without a host MAC", netType: "Overlay", noMAC: true,
			config: func(c *kubeproxyconfig.KubeProxyConfiguration) { c.Winkernel.SourceVip = f.sourceVIP }, wantErr: "MAC"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBE_NETWORK", tc.env)
			feats := hcntest.AllFeatures()
			if tc.features != nil {
				tc.features(&feats)
			}
			e := &env{t: t, f: f, hns: hcntest.NewFake(feats), mac: fakeMacs{}, cfg: &kubeproxyconfig.KubeProxyConfiguration{
				Winkernel: kubeproxyconfig.KubeProxyWinkernelConfiguration{NetworkName: testNetwork},
			}}
			if tc.noMAC {
				e.mac = noMACs{}
			}
			e.hns.AddNetwork(testNetwork, tc.netType)
			if tc.config != nil {
				tc.config(e.cfg)
			}
			p, err := newProxierInternal(t.Context(), e.cfg, f.family, testNode, net.ParseIP(f.node), nil, nil, e.hns, e.mac, false)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want one mentioning %q", err, tc.wantErr)
			case err == nil && p == nil:
				t.Fatalf("nil proxier")
			}
		})
	}
}

type noMACs struct{}

func (noMACs) GetHostMac(net.IP) string { return "" }

func TestHealthzPort(t *testing.T) {
	for addr, want := range map[string]int{"0.0.0.0:10256": 10256, "[::]:8080": 8080, "": 0, "nonsense": 0} {
		if got := healthzPortOf(addr); got != want {
			t.Errorf("healthzPortOf(%q) = %d, want %d", addr, got, want)
		}
	}
}

// The constructor waits for the CNI plugin's network, as upstream, instead
// of failing.
func TestNewProxierWaitsForTheNetwork(t *testing.T) {
	old := networkPollInterval
	networkPollInterval = 0
	t.Cleanup(func() { networkPollInterval = old })
	f := families[0]
	h := hcntest.NewFake(hcntest.AllFeatures())
	h.AddNetwork(testNetwork, hcnapi.NetworkTypeL2Bridge)
	notYet := hcnapi.NewError(hcnapi.KindNetworkNotFound, "network not found")
	h.FailNext(hcntest.OpGetNetworkByName, notYet, hcntest.HNSNotRunningError, notYet)
	cfg := &kubeproxyconfig.KubeProxyConfiguration{Winkernel: kubeproxyconfig.KubeProxyWinkernelConfiguration{NetworkName: testNetwork}}
	if _, err := newProxierInternal(t.Context(), cfg, f.family, testNode, net.ParseIP(f.node), nil, nil, h, fakeMacs{}, false); err != nil {
		t.Fatal(err)
	}
	if n := h.Calls()[hcntest.OpGetNetworkByName]; n != 4 {
		t.Errorf("%d network reads, want 4", n)
	}
	// Any other error fails at once.
	h.FailNext(hcntest.OpGetNetworkByName, errors.New("access denied"))
	if _, err := newProxierInternal(t.Context(), cfg, f.family, testNode, net.ParseIP(f.node), nil, nil, h, fakeMacs{}, false); err == nil {
		t.Errorf("an unexpected HNS error did not fail the constructor")
	}
}
