package v1alpha2

import (
	"testing"

	componentconfigtesting "k8s.io/component-base/config/testing"
)

// The component-base checker enforces the conventions every component config
// package follows (group name, registered kinds, JSON tags on every field).
func TestComponentConfigSetup(t *testing.T) {
	pkg := &componentconfigtesting.ComponentConfigPackage{
		ComponentName:      "kube-proxy",
		GroupName:          GroupName,
		SchemeGroupVersion: SchemeGroupVersion,
		AddToScheme:        AddToScheme,
	}
	if err := componentconfigtesting.VerifyExternalTypePackage(pkg); err != nil {
		t.Fatal(err)
	}
}
