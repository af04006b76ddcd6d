package v1alpha2

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/fields.txt")

// fieldLines flattens a struct type into "Path GoType json:tag" lines, descending
// into the struct types of this package only (also behind a pointer).
func fieldLines(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		out = append(out, fmt.Sprintf("%s%s %s json:%q", prefix, f.Name, f.Type.String(), f.Tag.Get("json")))
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() {
			out = append(out, fieldLines(ft, prefix+f.Name+".")...)
		}
	}
	return out
}

// The serialized form of v1alpha2 is an API: any change to a field name, type or
// JSON tag must be deliberate (rerun with -update) and reflected in
// docs/config-v1alpha2.md.
func TestFieldsGolden(t *testing.T) {
	got := strings.Join(fieldLines(reflect.TypeFor[KubeProxyConfiguration](), ""), "\n") + "\n"
	const path = "testdata/fields.txt"
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("v1alpha2 fields changed (-golden +now):\n%s", diff)
	}
}
