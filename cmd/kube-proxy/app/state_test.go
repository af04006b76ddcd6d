package app

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	lnserver "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/server"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

func examplesDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "examples", "cluster")
}

type stateDoc struct {
	Services []struct {
		Family string `json:"family"`
		Name   struct {
			Namespace, Name string
		} `json:"name"`
		Endpoints []map[string]any `json:"endpoints"`
	} `json:"services"`
	GlobalServices []map[string]any `json:"globalServices"`
	ServiceCIDRs   []map[string]any `json:"serviceCIDRs"`
	EndpointSlices []map[string]any `json:"endpointSlices"`
	Node           map[string]any   `json:"node"`
}

func runState(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newStateCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SetContext(context.Background())
	err := cmd.Execute()
	return out.String(), err
}

func TestStateCommand(t *testing.T) {
	// A served instance over a Static source, for --socket.
	src := source.NewStatic()
	src.SetNode(st.Node("node-a", "z1"))
	src.SetService(st.Service("ns", "web", []string{"10.0.0.1"}))
	src.SetEndpointSlice(st.EndpointSlice("ns", "web", "web-1", "http", 80, st.Endpoint("10.1.0.1", "node-a")))
	srv, err := lnserver.New(lnserver.Options{Proxy: proxyrun.Options{NodeName: "node-a"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := "unix://" + filepath.Join(t.TempDir(), "ln.sock")
	done := make(chan struct{}, 2)
	go func() { _ = srv.Run(ctx, src); done <- struct{}{} }()
	go func() { _ = srv.Serve(ctx, lnserver.ServeOptions{Address: addr}); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })

	tests := []struct {
		name     string
		args     []string
		wantErr  string
		services int
		global   bool
	}{
		{name: "manifests, json", args: []string{"--manifests", examplesDir(t), "--hostname-override", "node-1", "-o", "json"}, services: 8},
		{name: "manifests, global", args: []string{"--manifests", examplesDir(t), "--hostname-override", "node-1", "-o", "json", "--global"}, services: 8, global: true},
		{name: "socket", args: []string{"--socket", addr, "-o", "json", "--global"}, services: 1, global: true},
		{name: "bad output", args: []string{"-o", "xml"}, wantErr: `--output "xml": want yaml or json`},
		{name: "two sources", args: []string{"--socket", addr, "--manifests", "x"}, wantErr: "are alternatives"},
		{name: "dead socket", args: []string{"--socket", "unix://" + filepath.Join(t.TempDir(), "none.sock"), "--timeout", "300ms"}, wantErr: "reading the state from unix://"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runState(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var doc stateDoc
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			if len(doc.Services) != tc.services {
				t.Errorf("%d services, want %d", len(doc.Services), tc.services)
			}
			if tc.global != (len(doc.GlobalServices) > 0 && len(doc.EndpointSlices) > 0 && doc.Node != nil) {
				t.Errorf("global view: %d services, %d slices, node %v", len(doc.GlobalServices), len(doc.EndpointSlices), doc.Node)
			}
			// The examples hold one ServiceCIDR (servicecidr.yaml).
			if wantCIDRs := tc.global && tc.name == "manifests, global"; wantCIDRs != (len(doc.ServiceCIDRs) == 1) {
				t.Errorf("global view: %d ServiceCIDRs: %v", len(doc.ServiceCIDRs), doc.ServiceCIDRs)
			}
		})
	}
	// YAML is the default.
	out, err := runState(t, "--socket", addr)
	if err != nil || !strings.Contains(out, "services:\n- clusterIp: 10.0.0.1") {
		t.Errorf("yaml output: %v\n%s", err, out)
	}
}

// With manifests that cannot be read, `state` fails at once with the reason,
// rather than logging it and waiting out --timeout.
func TestStateManifestErrorsFailAtOnce(t *testing.T) {
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "svc.yaml"), []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x, namespace: d\nspec: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing directory", filepath.Join(t.TempDir(), "nonexistent"), "no such file or directory"},
		{"parse error", bad, "svc.yaml:3: Service d/x: invalid YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := runState(t, "--manifests="+tc.path, "--hostname-override=node-1", "--timeout=30s")
			if elapsed := time.Since(start); elapsed > 10*time.Second {
				t.Errorf("took %v: waited out --timeout", elapsed)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
