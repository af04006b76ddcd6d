package config

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

// declaredFields lists "Struct.Field TypeExpr" (and "type Name Underlying" for
// non-struct types) as written in a Go source file.
func declaredFields(t *testing.T, path string) sets.Set[string] {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := sets.New[string]()
	expr := func(e ast.Expr) string {
		var b bytes.Buffer
		if err := printer.Fprint(&b, fset, e); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			out.Insert(fmt.Sprintf("type %s %s", ts.Name.Name, expr(ts.Type)))
			return false
		}
		for _, fl := range st.Fields.List {
			if len(fl.Names) == 0 {
				out.Insert(fmt.Sprintf("%s.(embedded) %s", ts.Name.Name, expr(fl.Type)))
			}
			for _, name := range fl.Names {
				out.Insert(fmt.Sprintf("%s.%s %s", ts.Name.Name, name.Name, expr(fl.Type)))
			}
		}
		return false
	})
	return out
}

// testdata/upstream-v1.37.2-fields.txt is the same listing made from upstream's
// pkg/proxy/apis/config/types.go. Fields may be added here, never removed,
// renamed or retyped: the proxiers and third parties read them.
func TestKeepsUpstreamFields(t *testing.T) {
	data, err := os.ReadFile("testdata/upstream-v1.37.2-fields.txt")
	if err != nil {
		t.Fatal(err)
	}
	upstream := sets.New(strings.Split(strings.TrimSpace(string(data)), "\n")...)
	ours := declaredFields(t, "types.go")
	if missing := upstream.Difference(ours); missing.Len() > 0 {
		t.Errorf("upstream fields missing or changed:\n  %s", strings.Join(sets.List(missing), "\n  "))
	}
	added := sets.List(ours.Difference(upstream))
	want := []string{
		"KubeProxyConfiguration.ConfigHardFail bool",
		"KubeProxyConfiguration.IPFamilyPolicy IPFamilyPolicy",
		"KubeProxyConfiguration.LocalNode KubeProxyLocalNodeConfiguration",
		"KubeProxyConfiguration.NodeIPOverride []string",
		"KubeProxyConfiguration.SocketLB KubeProxySocketLBConfiguration",
		"KubeProxyIPVSConfiguration.MasqueradeBit *int32",
		"KubeProxyLocalNodeConfiguration.ClientCAFile string",
		"KubeProxyLocalNodeConfiguration.ServeAddress string",
		"KubeProxyLocalNodeConfiguration.TLSCertFile string",
		"KubeProxyLocalNodeConfiguration.TLSPrivateKeyFile string",
		"KubeProxySocketLBConfiguration.CgroupPath string",
		"KubeProxySocketLBConfiguration.Enabled bool",
		"type IPFamilyPolicy string",
	}
	if strings.Join(added, "\n") != strings.Join(want, "\n") {
		t.Errorf("fields beyond upstream changed; update this list and docs/config-v1alpha2.md:\n  got  %q\n  want %q", added, want)
	}
}
