package manifests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// clusterYAML renders n Services with one two-endpoint EndpointSlice each.
func clusterYAML(n, generation int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `apiVersion: v1
kind: Service
metadata: {name: s%d, namespace: bench}
spec:
  clusterIP: 10.96.%d.%d
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: s%d-x, namespace: bench, labels: {kubernetes.io/service-name: s%d}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: [198.19.%d.%d]
- addresses: [198.19.%d.%d]
---
`, i, i/250, i%250+1, i, i, i/250, i%250+1, 100+i/250, (i+generation)%250+1)
	}
	return b.String()
}

// BenchmarkDecode measures parsing, defaulting and validating 1000 Services and
// their EndpointSlices from one multi-document file.
func BenchmarkDecode(b *testing.B) {
	data := []byte(clusterYAML(1000, 0))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		objs, problems := Decode("bench.yaml", data)
		if len(objs) != 2000 || len(problems) != 0 {
			b.Fatalf("%d objects, %v", len(objs), problems)
		}
	}
}

// BenchmarkSyncOneChange measures a rescan of 1000 Services in which one
// EndpointSlice changed: read, decode, diff, one update.
func BenchmarkSyncOneChange(b *testing.B) {
	dir := b.TempDir()
	file := filepath.Join(dir, "c.yaml")
	base := clusterYAML(1000, 0)
	if err := os.WriteFile(file, []byte(base), 0o644); err != nil {
		b.Fatal(err)
	}
	s := NewReader(dir)
	ctx := context.Background()
	if _, err := s.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	// Alternate between two versions that differ in one endpoint of s0.
	variants := []string{base, strings.Replace(base, "198.19.100.1]", "198.19.100.200]", 1)}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if err := os.WriteFile(file, []byte(variants[i%2]), 0o644); err != nil {
			b.Fatal(err)
		}
		res, err := s.Sync(ctx)
		if err != nil || res.Updated != 1 {
			b.Fatalf("%+v %v", res, err)
		}
	}
}
