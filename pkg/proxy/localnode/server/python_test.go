package server

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// TestPythonClient reads the state from Python with Debian's python3-grpcio and
// python3-protobuf, the messages generated from localnode.proto by protoc: another
// language needs the .proto file and nothing else.
func TestPythonClient(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s (Debian's python3)", python)
	}
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("needs protoc (Debian's protobuf-compiler) to generate the Python messages")
	}
	if out, err := exec.Command(python, "-c", "import grpc, google.protobuf").CombinedOutput(); err != nil {
		t.Skipf("needs Debian's python3-grpcio and python3-protobuf: %v\n%s", err, out)
	}
	gen := t.TempDir()
	if out, err := exec.Command(protoc, "-I", "../api/v1", "--python_out="+gen, "localnode.proto").CombinedOutput(); err != nil {
		t.Fatalf("protoc --python_out: %v\n%s", err, out)
	}

	src := source.NewStatic()
	cluster(src, 3, 2)
	r := start(t, src, t.TempDir(), Options{})
	out, err := exec.Command(python, "testdata/watch.py", strings.TrimPrefix(r.addr, "unix://"), gen).CombinedOutput()
	if err != nil {
		t.Fatalf("python client: %v\n%s", err, out)
	}
	var want strings.Builder
	st, _ := r.srv.State(localnode.IPv4)
	for _, svc := range st.Services {
		var eps []string
		for _, e := range svc.ClusterEndpoints() {
			eps = append(eps, e.String())
		}
		fmt.Fprintf(&want, "IPV4 %s %s:%d %s\n", svc.Name, svc.ClusterIP, svc.Port, strings.Join(eps, ","))
	}
	fmt.Fprintf(&want, "revision %d\n", r.srv.Revision())
	if string(out) != want.String() {
		t.Errorf("python client read:\n%s\nwant:\n%s", out, want.String())
	}
}
