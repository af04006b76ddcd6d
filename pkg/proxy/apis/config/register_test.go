package config

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentconfigtesting "k8s.io/component-base/config/testing"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// The internal type must follow the component config conventions; the embedded
// apimachinery and logging types are external types that carry JSON tags by
// design, so they are allowed.
func TestComponentConfigSetup(t *testing.T) {
	err := componentconfigtesting.VerifyInternalTypePackage(&componentconfigtesting.ComponentConfigPackage{
		ComponentName:      "kube-proxy",
		GroupName:          GroupName,
		SchemeGroupVersion: SchemeGroupVersion,
		AddToScheme:        AddToScheme,
		AllowedTags: map[reflect.Type]bool{
			reflect.TypeFor[metav1.TypeMeta]():              true,
			reflect.TypeFor[metav1.Duration]():              true,
			reflect.TypeFor[logsapi.LoggingConfiguration](): true,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestFlagValues(t *testing.T) {
	var m ProxyMode
	var l LocalMode
	var p IPFamilyPolicy
	for _, tc := range []struct {
		v interface {
			Set(string) error
			String() string
			Type() string
		}
		in, typ string
	}{
		{&m, "nftables", "ProxyMode"},
		{&l, "NodeCIDR", "LocalMode"},
		{&p, "RequireDualStack", "IPFamilyPolicy"},
	} {
		if err := tc.v.Set(tc.in); err != nil {
			t.Fatalf("Set(%q): %v", tc.in, err)
		}
		if got := tc.v.String(); got != tc.in {
			t.Errorf("String() = %q, want %q", got, tc.in)
		}
		if got := tc.v.Type(); got != tc.typ {
			t.Errorf("Type() = %q, want %q", got, tc.typ)
		}
	}
	var nilMode *ProxyMode
	var nilLocal *LocalMode
	var nilPolicy *IPFamilyPolicy
	if nilMode.String() != "" || nilLocal.String() != "" || nilPolicy.String() != "" {
		t.Error("a nil value must print as the empty string")
	}
}
