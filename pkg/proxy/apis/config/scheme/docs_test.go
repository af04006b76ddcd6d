package scheme

import (
	"os"
	"reflect"
	"strings"
	"testing"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	configv1alpha2 "k8s.io/kube-proxy/config/v1alpha2"
)

// jsonLeaves lists the JSON paths of t's fields, descending into the struct
// types of the config API packages and component-base's client connection; the
// logging block is one entry ("logging.*") as the guide documents it whole.
func jsonLeaves(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous {
			continue // TypeMeta: apiVersion and kind
		}
		path := prefix + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case name == "logging":
			out = append(out, "logging.*")
		case ft.Kind() == reflect.Struct && (strings.HasPrefix(ft.PkgPath(), "k8s.io/kube-proxy/config/") || name == "clientConnection"):
			out = append(out, jsonLeaves(ft, path+".")...)
		default:
			out = append(out, path)
		}
	}
	return out
}

// The migration guide must have a row naming every field of both versions.
func TestMigrationGuideCoversEveryField(t *testing.T) {
	data, err := os.ReadFile("../../../../../docs/config-v1alpha2.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "| ") && strings.Contains(line, "`") {
			rows = append(rows, line)
		}
	}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[configv1alpha1.KubeProxyConfiguration](),
		reflect.TypeFor[configv1alpha2.KubeProxyConfiguration](),
	} {
		for _, path := range jsonLeaves(typ, "") {
			found := false
			for _, row := range rows {
				if strings.Contains(row, "`"+path+"`") {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("docs/config-v1alpha2.md has no table row for %s field %q", typ.PkgPath(), path)
			}
		}
	}
}
