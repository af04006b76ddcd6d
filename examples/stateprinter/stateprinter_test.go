package main

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

func TestFormat(t *testing.T) {
	ip := netip.MustParseAddr
	name := localnode.PortName{Namespace: "demo", Name: "web", Port: "http", Protocol: localnode.TCP}
	tests := []struct {
		name  string
		state *localnode.State
		want  []string
	}{
		{
			name:  "empty",
			state: &localnode.State{Family: localnode.IPv4},
			want:  []string{"revision 3 IPv4 digest * services 0"},
		},
		{
			name: "every setting and endpoint role",
			state: &localnode.State{Family: localnode.IPv4, Services: []localnode.Service{{
				ServicePort: localnode.ServicePort{
					Name: name, ClusterIP: ip("10.96.0.10"), Port: 80, NodePort: 30080,
					ExternalIPs: []netip.Addr{ip("192.0.2.1")}, LoadBalancerVIPs: []netip.Addr{ip("192.0.2.2")},
					SourceRanges:    []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
					SessionAffinity: localnode.AffinityClientIP, AffinityTimeout: time.Hour,
					InternalPolicy: localnode.PolicyCluster, ExternalPolicy: localnode.PolicyLocal, HealthCheckNodePort: 32000,
				},
				HasAnyEndpoints: true,
				Endpoints: []localnode.Endpoint{
					{IP: ip("10.1.0.1"), Port: 8080, Ready: true, Serving: true, Local: true, ForCluster: true, ForLocal: true, NodeName: "node-1", Zone: "a"},
					{IP: ip("10.1.0.2"), Port: 8080, Serving: true, Terminating: true, ForCluster: true},
				},
			}}},
			want: []string{
				"revision 3 IPv4 digest * services 1",
				"  demo/web:http/TCP 10.96.0.10:80 nodePort=30080 externalIPs=[192.0.2.1] loadBalancer=[192.0.2.2] sourceRanges=[203.0.113.0/24] affinity=ClientIP/1h0m0s external=Local healthCheckNodePort=32000",
				"    -> 10.1.0.1:8080 for=cluster+local node=node-1 zone=a",
				"    -> 10.1.0.2:8080 for=cluster terminating",
			},
		},
		{
			name: "endpoints elsewhere only, and none at all",
			state: &localnode.State{Family: localnode.IPv6, Services: []localnode.Service{
				{ServicePort: localnode.ServicePort{Name: name, ClusterIP: ip("fd00::10"), Port: 80, InternalPolicy: localnode.PolicyLocal}, HasAnyEndpoints: true},
				{ServicePort: localnode.ServicePort{Name: localnode.PortName{Namespace: "demo", Name: "x", Protocol: localnode.UDP}, ClusterIP: ip("fd00::11"), Port: 53}},
			}},
			want: []string{
				"revision 3 IPv6 digest * services 2",
				"  demo/web:http/TCP fd00::10:80 internal=Local (no endpoints usable from this node: drop)",
				"  demo/x/UDP fd00::11:53 (no endpoints: reject)",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines := strings.Split(strings.TrimSuffix(Format(3, tc.state), "\n"), "\n")
			// The digest is checked by localnode's tests; here only its place.
			lines[0] = strings.Replace(lines[0], tc.state.Digest().Short(), "*", 1)
			if diff := cmp.Diff(tc.want, lines); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const manifest = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec:
  type: ClusterIP
  clusterIP: 10.96.0.10
  internalTrafficPolicy: Local
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: demo
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: [198.19.1.10]
  nodeName: node-1
  conditions: {ready: true}
- addresses: [198.19.2.10]
  nodeName: node-2
  conditions: {ready: true}
`

// TestRunFromManifests runs the command's path end to end on manifest files: the first
// revision, no revision for an edit that does not concern node-1, one for an edit that
// does.
func TestRunFromManifests(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, config{manifests: dir, node: "node-1", minSync: 10 * time.Millisecond}, &out)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	waitFor := func(what, substr string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(out.String(), substr) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %q never printed; output:\n%s", what, substr, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("first revision", "revision 1 IPv4")
	if !strings.Contains(out.String(), "  demo/web:http/TCP 10.96.0.10:80 internal=Local\n    -> 198.19.1.10:8080 for=local node=node-1\n") {
		t.Fatalf("first revision is not node-1's view:\n%s", out.String())
	}

	// node-2's endpoint moves: nothing for node-1 under internal Local policy.
	edit := func(from, to string) {
		t.Helper()
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(strings.Replace(string(data), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("198.19.2.10", "198.19.2.11")
	// Then node-1's endpoint moves, which must be the very next revision.
	time.Sleep(300 * time.Millisecond)
	edit("198.19.1.10", "198.19.1.11")
	waitFor("second revision", "revision 2 IPv4")
	if got := out.String(); strings.Count(got, "revision ") != 2 || !strings.Contains(got, "-> 198.19.1.11:8080 for=local") {
		t.Fatalf("want exactly one new revision with the moved endpoint; output:\n%s", got)
	}
}
