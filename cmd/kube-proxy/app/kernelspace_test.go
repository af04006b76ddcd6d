package app

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	proxytesting "k8s.io/kube-proxy/pkg/proxy/metaproxier/testing"
)

// fakeWinkernel records what the Windows wiring asked of winkernel.
type fakeWinkernel struct {
	kernelErr    error
	dualStack    bool
	constructErr error
	cleanupFails bool
	calls        []string
	provider     *proxytesting.RecordingProvider
	gotHealthz   *healthcheck.ProxyHealthServer
}

func (f *fakeWinkernel) backend() *winkernelBackend {
	f.provider = proxytesting.NewRecordingProvider()
	return &winkernelBackend{
		checkKernel: func() error { f.calls = append(f.calls, "checkKernel"); return f.kernelErr },
		dualStackCompatible: func(networkName string) bool {
			f.calls = append(f.calls, "dualStackCompatible "+networkName)
			return f.dualStack
		},
		newProxier: func(cfg *kubeproxyconfig.KubeProxyConfiguration, family v1.IPFamily, nodeName string, nodeIP net.IP, _ events.EventRecorder, hz *healthcheck.ProxyHealthServer) (proxy.Provider, error) {
			f.calls = append(f.calls, fmt.Sprintf("NewProxier %s %s %s dsr=%v", family, nodeName, nodeIP, cfg.Winkernel.EnableDSR))
			f.gotHealthz = hz
			if f.constructErr != nil {
				return nil, f.constructErr
			}
			return f.provider, nil
		},
		newDualStackProxier: func(cfg *kubeproxyconfig.KubeProxyConfiguration, nodeName string, nodeIPs map[v1.IPFamily]net.IP, _ events.EventRecorder, hz *healthcheck.ProxyHealthServer) (proxy.Provider, error) {
			f.calls = append(f.calls, fmt.Sprintf("NewDualStackProxier %s %s %s dsr=%v", nodeName, nodeIPs[v1.IPv4Protocol], nodeIPs[v1.IPv6Protocol], cfg.Winkernel.EnableDSR))
			f.gotHealthz = hz
			if f.constructErr != nil {
				return nil, f.constructErr
			}
			return f.provider, nil
		},
		cleanupLeftovers: func() bool { f.calls = append(f.calls, "CleanupLeftovers"); return f.cleanupFails },
	}
}

// windowsServer is a ProxyServer as newProxyServer leaves it on Windows before the
// proxier is created.
func windowsServer(primary v1.IPFamily, dryRun bool) *ProxyServer {
	cfg := newKubeProxyConfiguration()
	applyWindowsDefaults(cfg)
	cfg.Winkernel.NetworkName = "cbr-net"
	cfg.Winkernel.EnableDSR = true
	s := &ProxyServer{
		Config:          cfg,
		NodeName:        "win-node",
		PrimaryIPFamily: primary,
		NodeIPs:         map[v1.IPFamily]net.IP{v1.IPv4Protocol: net.ParseIP("198.18.0.10"), v1.IPv6Protocol: net.ParseIP("fd00:18::10")},
		HealthzServer:   healthcheck.NewProxyHealthServer("127.0.0.1:0", 0, nil),
	}
	windowsNodeIPs(primary, s.NodeIPs)
	if dryRun {
		s.dryRun = newDryRunOutput()
	}
	return s
}

func TestKernelspaceModeImplemented(t *testing.T) {
	tests := []struct {
		name    string
		mode    kubeproxyconfig.ProxyMode
		noBack  bool
		wantErr string
	}{
		{name: "kernelspace", mode: kubeproxyconfig.ProxyModeKernelspace},
		{name: "a Linux mode", mode: kubeproxyconfig.ProxyModeNFTables, wantErr: `proxy mode "nftables" is not supported on Windows`},
		{name: "a build without winkernel", mode: kubeproxyconfig.ProxyModeKernelspace, noBack: true, wantErr: "no winkernel backend"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := (&fakeWinkernel{}).backend()
			if tc.noBack {
				b = nil
			}
			checkErr(t, b.modeImplemented(tc.mode), tc.wantErr)
		})
	}
}

func TestKernelspaceCheckSupported(t *testing.T) {
	errHNS := errors.New("HNS service is not running")
	tests := []struct {
		name      string
		fake      fakeWinkernel
		noBackend bool
		dryRun    bool
		wantDual  bool
		wantCalls string
		wantErr   string
	}{
		{name: "single-stack network", wantCalls: "checkKernel,dualStackCompatible cbr-net"},
		{name: "dual-stack network", fake: fakeWinkernel{dualStack: true}, wantDual: true, wantCalls: "checkKernel,dualStackCompatible cbr-net"},
		{name: "HNS unusable", fake: fakeWinkernel{kernelErr: errHNS}, wantCalls: "checkKernel", wantErr: "cannot run the kernelspace proxier: HNS service is not running"},
		{name: "dry run is refused before HNS is asked", dryRun: true, wantErr: "--dry-run is not supported by the kernelspace proxy mode"},
		{name: "no backend", noBackend: true, wantErr: "no winkernel backend"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.fake.backend()
			if tc.noBackend {
				b = nil
			}
			v4, v6, dual, err := b.checkSupported(windowsServer(v1.IPv4Protocol, tc.dryRun))
			checkErr(t, err, tc.wantErr)
			if got := strings.Join(tc.fake.calls, ","); got != tc.wantCalls {
				t.Errorf("calls %q, want %q", got, tc.wantCalls)
			}
			if tc.wantErr == "" && (!v4 || !v6 || dual != tc.wantDual) {
				t.Errorf("got v4=%v v6=%v dual=%v, want true true %v", v4, v6, dual, tc.wantDual)
			}
			if errors.Is(tc.fake.kernelErr, errHNS) && !errors.Is(err, errHNS) {
				t.Errorf("error %v does not wrap HNS's", err)
			}
		})
	}
}

func TestKernelspaceCreateProxier(t *testing.T) {
	errCreate := errors.New("network cbr-net not found")
	tests := []struct {
		name      string
		primary   v1.IPFamily
		dualStack bool
		initOnly  bool
		dryRun    bool
		mode      kubeproxyconfig.ProxyMode
		fake      fakeWinkernel
		wantCalls string
		wantErr   string
	}{
		{
			name: "IPv4 single-stack", primary: v1.IPv4Protocol,
			wantCalls: "NewProxier IPv4 win-node 198.18.0.10 dsr=true",
		},
		{
			name: "IPv6 single-stack", primary: v1.IPv6Protocol,
			wantCalls: "NewProxier IPv6 win-node fd00:18::10 dsr=true",
		},
		{
			// As upstream, the secondary family's node IP is the unspecified address.
			name: "dual-stack goes to winkernel's own dual-stack constructor", primary: v1.IPv4Protocol, dualStack: true,
			wantCalls: "NewDualStackProxier win-node 198.18.0.10 :: dsr=true",
		},
		{
			name: "constructor failure", primary: v1.IPv4Protocol, fake: fakeWinkernel{constructErr: errCreate},
			wantCalls: "NewProxier IPv4 win-node 198.18.0.10 dsr=true", wantErr: "unable to create proxier: network cbr-net not found",
		},
		{name: "init only", primary: v1.IPv4Protocol, initOnly: true, wantErr: "--init-only is not implemented on Windows"},
		{name: "dry run", primary: v1.IPv4Protocol, dryRun: true, wantErr: "--dry-run is not supported by the kernelspace proxy mode"},
		{name: "a Linux mode", primary: v1.IPv4Protocol, mode: kubeproxyconfig.ProxyModeIPTables, wantErr: `proxy mode "iptables" is not supported on Windows`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			b := tc.fake.backend()
			s := windowsServer(tc.primary, tc.dryRun)
			if tc.mode != "" {
				s.Config.Mode = tc.mode
			}
			p, err := b.createProxier(ctx, s, s.Config, tc.dualStack, tc.initOnly)
			checkErr(t, err, tc.wantErr)
			if got := strings.Join(tc.fake.calls, ","); got != tc.wantCalls {
				t.Errorf("calls %q, want %q", got, tc.wantCalls)
			}
			if tc.wantErr != "" {
				if p != nil {
					t.Errorf("got a proxier %v with an error", p)
				}
				if tc.fake.constructErr != nil && !errors.Is(err, tc.fake.constructErr) {
					t.Errorf("error %v does not wrap the constructor's", err)
				}
				return
			}
			if p != proxy.Provider(tc.fake.provider) {
				t.Errorf("got %v, want the constructor's proxier", p)
			}
			if tc.fake.gotHealthz != s.HealthzServer {
				t.Errorf("the proxier did not get the health server")
			}
		})
	}
}

func TestKernelspaceCleanup(t *testing.T) {
	tests := []struct {
		name           string
		cleanupAndExit bool
		fails          bool
		noBackend      bool
		wantCalls      string
		wantErr        string
	}{
		{name: "normal start: nothing of another mode to remove"},
		{name: "--cleanup", cleanupAndExit: true, wantCalls: "CleanupLeftovers"},
		{name: "--cleanup fails", cleanupAndExit: true, fails: true, wantCalls: "CleanupLeftovers", wantErr: "removing HNS load balancers"},
		{name: "--cleanup without winkernel", cleanupAndExit: true, noBackend: true, wantErr: "no winkernel backend"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := &fakeWinkernel{cleanupFails: tc.fails}
			b := f.backend()
			if tc.noBackend {
				b = nil
			}
			checkErr(t, b.cleanup(ctx, tc.cleanupAndExit), tc.wantErr)
			if got := strings.Join(f.calls, ","); got != tc.wantCalls {
				t.Errorf("calls %q, want %q", got, tc.wantCalls)
			}
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("unexpected error: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("error %v, want one containing %q", err, want)
	}
}
