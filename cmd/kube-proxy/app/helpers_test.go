package app

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2/ktesting"
	netutils "k8s.io/utils/net"
)

func TestIPFlagValues(t *testing.T) {
	tests := []struct {
		value   string
		ip, ipp bool // accepted by ipVar, ipPortVar
	}{
		{"", true, true},
		{"198.18.0.1", true, true},
		{"fd00::1", true, true},
		{"198.18.0.1:10256", false, true},
		{"[fd00::1]:10256", false, true},
		{"198.18.0.1:99999", false, false},
		{"198.18.0.1:x", false, false},
		{"host:80", false, false},
		{"1.2.3", false, false},
	}
	for _, tc := range tests {
		var s1, s2 string
		if err := (ipVar{&s1}).Set(tc.value); (err == nil) != tc.ip {
			t.Errorf("ip %q: err=%v, want accepted=%v", tc.value, err, tc.ip)
		} else if err == nil && s1 != tc.value {
			t.Errorf("ip %q stored %q", tc.value, s1)
		}
		if err := (ipPortVar{&s2}).Set(tc.value); (err == nil) != tc.ipp {
			t.Errorf("ipport %q: err=%v, want accepted=%v", tc.value, err, tc.ipp)
		} else if err != nil && !strings.Contains(err.Error(), tc.value) {
			t.Errorf("ipport error %q does not quote the value", err)
		}
	}
	if (ipVar{}).Type() != "ip" || (ipPortVar{}).Type() != "ipport" {
		t.Error("flag type names must match upstream")
	}
}

func TestApplyOOMScoreAdj(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("oom_score_adj is Linux-only; on %s applyOOMScoreAdj refuses every value", runtime.GOOS)
	}
	root := t.TempDir()
	old := procRoot
	procRoot = root
	t.Cleanup(func() { procRoot = old })
	for _, who := range []string{"self", "42"} {
		if err := os.MkdirAll(filepath.Join(root, who), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, who, "oom_score_adj"), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		pid, value int
		file       string
		wantErr    string
	}{
		{pid: 0, value: -999, file: "self"},
		{pid: 42, value: 500, file: "42"},
		{pid: 7, value: 1, wantErr: "does not exist"},
		{pid: 0, value: -1001, wantErr: "[-1000, 1000]"},
		{pid: -1, value: 0, wantErr: "invalid pid"},
	}
	for _, tc := range tests {
		err := applyOOMScoreAdj(tc.pid, tc.value)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("pid %d value %d: err %v, want %q", tc.pid, tc.value, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("pid %d: %v", tc.pid, err)
		}
		got, _ := os.ReadFile(filepath.Join(root, tc.file, "oom_score_adj"))
		if strings.TrimSpace(string(got)) != strconv.Itoa(tc.value) {
			t.Errorf("pid %d: file holds %q", tc.pid, got)
		}
	}
}

// The real /proc: raising this process's own score is always allowed.
func TestApplyOOMScoreAdjReal(t *testing.T) {
	cur, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Skipf("no /proc/self/oom_score_adj: %v", err)
	}
	orig := strings.TrimSpace(string(cur))
	if err := applyOOMScoreAdj(0, 1000); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		_ = os.WriteFile("/proc/self/oom_score_adj", []byte(orig), 0o644)
	}
}

func TestConfigWatcher(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := newConfigWatcher(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errCh := make(chan error, 1)
	w.run(ctx, errCh)
	if err := os.WriteFile(path, []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errCh:
		if err != errConfigFileChanged {
			t.Fatalf("got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification of the config file change")
	}
	if _, err := newConfigWatcher(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("watching a missing file must fail")
	}
}

func TestDetectNodeIPs(t *testing.T) {
	ips := func(s ...string) []net.IP {
		var out []net.IP
		for _, x := range s {
			out = append(out, netutils.ParseIPSloppy(x))
		}
		return out
	}
	tests := []struct {
		name        string
		raw         []net.IP
		bind        string
		wantPrimary v1.IPFamily
		want4       string
		want6       string
	}{
		{"nothing known: loopback", nil, "0.0.0.0", v1.IPv4Protocol, "127.0.0.1", "::1"},
		{"node IPv4 only", ips("198.18.0.10"), "0.0.0.0", v1.IPv4Protocol, "198.18.0.10", "::1"},
		{"node dual, IPv6 first", ips("fd00:18::10", "198.18.0.10"), "", v1.IPv6Protocol, "198.18.0.10", "fd00:18::10"},
		{"second IP of the same family is ignored", ips("198.18.0.10", "198.18.0.11"), "", v1.IPv4Protocol, "198.18.0.10", "::1"},
		{"bind address wins and sets the primary family", ips("198.18.0.10", "fd00:18::10"), "fd00:18::99", v1.IPv6Protocol, "198.18.0.10", "fd00:18::99"},
		{"unspecified IPv6 bind address is ignored", ips("198.18.0.10"), "::", v1.IPv4Protocol, "198.18.0.10", "::1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			primary, got := detectNodeIPs(ctx, tc.raw, tc.bind)
			if primary != tc.wantPrimary || got[v1.IPv4Protocol].String() != tc.want4 || got[v1.IPv6Protocol].String() != tc.want6 {
				t.Errorf("got %s %v, want %s %s/%s", primary, got, tc.wantPrimary, tc.want4, tc.want6)
			}
		})
	}
}

func TestExpandNodePortAddressKeywords(t *testing.T) {
	nodeIPs := map[v1.IPFamily]net.IP{v1.IPv4Protocol: netutils.ParseIPSloppy("198.18.0.10"), v1.IPv6Protocol: net.IPv6loopback}
	tests := []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"primary"}, "198.18.0.10/32"}, // loopback IPv6 node IP is skipped
		{[]string{"localhost"}, "127.0.0.0/8,::1/128"},
		{[]string{"all"}, "0.0.0.0/0,::/0"},
		{[]string{"198.18.0.0/16", "primary"}, "198.18.0.0/16,198.18.0.10/32"},
	}
	for _, tc := range tests {
		if got := strings.Join(expandNodePortAddressKeywords(tc.in, nodeIPs), ","); got != tc.want {
			t.Errorf("%v -> %q, want %q", tc.in, got, tc.want)
		}
	}
}

// An unreachable API server is retried and /healthz/apiserver on the metrics port says
// why, while /healthz stays 200 as upstream's does (it only says the process serves).
func TestMetricsHealthzReportsUnreachableAPIServer(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()

	client, err := createClient(ctx, componentbaseconfig.ClientConnectionConfiguration{ContentType: "application/json", QPS: 5, Burst: 10}, "http://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	h := &apiHealth{}
	go h.run(ctx, client)
	srv := httptest.NewServer(newMetricsMux("iptables", false, nil, h))
	defer srv.Close()

	deadline := time.Now().Add(15 * time.Second)
	for {
		if resp, err := http.Get(srv.URL + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz while the API server is unreachable: %v %v, want 200 (as upstream)", resp, err)
		} else {
			_ = resp.Body.Close()
		}
		resp, err := http.Get(srv.URL + "/healthz/apiserver")
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 4096)
		n, _ := resp.Body.Read(body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			if !strings.Contains(string(body[:n]), "API server unreachable") || !strings.Contains(string(body[:n]), addr) {
				t.Fatalf("503 without the reason: %q", body[:n])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz/apiserver still %d: %q", resp.StatusCode, body[:n])
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The API server comes back: /healthz recovers.
	api := httptest.NewUnstartedServer(fakeAPIServer(false))
	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot rebind %s: %v", addr, err)
	}
	api.Listener = l2
	api.Start()
	defer api.Close()
	deadline = time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(srv.URL + "/healthz/apiserver")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz/apiserver did not recover: %d", resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestMetricsMuxPaths(t *testing.T) {
	if err := setConfigz(NewOptions().config); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newMetricsMux("nftables", true, nil, nil))
	defer srv.Close()
	for _, tc := range []struct {
		path, want string
	}{
		{"/proxyMode", "nftables"},
		{"/healthz", "ok"},
		{"/configz", "kubeproxy.config.k8s.io/v1alpha1"},
		{"/metrics", "# HELP"},
		{"/debug/pprof/", "goroutine"},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1<<16)
		n, _ := resp.Body.Read(buf)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(buf[:n]), tc.want) {
			t.Errorf("%s: %d %q, want 200 containing %q", tc.path, resp.StatusCode, buf[:min(n, 200)], tc.want)
		}
	}
}

// fakeAPIServer answers the two requests apiHealth probes with; when forbid is set it
// refuses the Service list the way RBAC does for an identity without permissions.
func fakeAPIServer(forbid bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/version":
			_, _ = w.Write([]byte(`{"major":"1","minor":"37"}`))
		case r.URL.Path == "/api/v1/services" && forbid:
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,` +
				`"message":"services is forbidden: User \"nobody\" cannot list resource \"services\" in API group \"\" at the cluster scope"}`))
		case r.URL.Path == "/api/v1/services":
			_, _ = w.Write([]byte(`{"kind":"ServiceList","apiVersion":"v1","metadata":{},"items":[]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
}

func TestAPIHealthReportsRBACDenial(t *testing.T) {
	tests := []struct {
		name     string
		forbid   bool
		wantErr  bool
		wantText string
	}{
		{name: "permitted identity is healthy", forbid: false},
		{name: "denied identity names RBAC", forbid: true, wantErr: true, wantText: "refuses kube-proxy's requests"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			api := httptest.NewServer(fakeAPIServer(tc.forbid))
			defer api.Close()
			client, err := createClient(ctx, componentbaseconfig.ClientConnectionConfiguration{ContentType: "application/json", QPS: 50, Burst: 100}, api.URL)
			if err != nil {
				t.Fatal(err)
			}
			h := &apiHealth{}
			h.set(probeAPI(ctx, client))
			err = h.check()
			if (err != nil) != tc.wantErr {
				t.Fatalf("check() = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("check() = %q, want it to contain %q", err, tc.wantText)
			}
		})
	}
}
