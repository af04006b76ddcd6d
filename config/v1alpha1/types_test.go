package v1alpha1

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fieldLines flattens a struct type into "Path GoType json:tag" lines, descending
// into the struct types of this package only.
func fieldLines(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		out = append(out, fmt.Sprintf("%s%s %s json:%q", prefix, f.Name, f.Type.String(), f.Tag.Get("json")))
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
			out = append(out, fieldLines(f.Type, prefix+f.Name+".")...)
		}
	}
	return out
}

// testdata/upstream-v0.37.2-fields.txt was produced by the same walk over upstream
// k8s.io/kube-proxy@v0.37.2/config/v1alpha1 in a scratch module. Any difference in
// field names, order, types or JSON tags would break config files or importers.
func TestFieldsMatchUpstream(t *testing.T) {
	data, err := os.ReadFile("testdata/upstream-v0.37.2-fields.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(string(data)), "\n")
	got := fieldLines(reflect.TypeOf(KubeProxyConfiguration{}), "")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("v1alpha1 differs from upstream (-upstream +ours):\n%s", diff)
	}
}
