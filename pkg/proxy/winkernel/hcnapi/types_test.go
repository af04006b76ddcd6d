package hcnapi

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorKinds(t *testing.T) {
	wrapped := fmt.Errorf("creating: %w", NewError(KindPortAlreadyExists, "port exists"))
	if !IsPortAlreadyExists(wrapped) || KindOf(wrapped) != KindPortAlreadyExists {
		t.Errorf("kind lost through wrapping: %v", KindOf(wrapped))
	}
	if wrapped.Error() != "creating: port exists" {
		t.Errorf("message = %q; the HNS text must stay as it is", wrapped.Error())
	}
	plain := errors.New("boom")
	for name, is := range map[string]func(error) bool{
		"IsNotFound": IsNotFound, "IsNetworkNotFound": IsNetworkNotFound, "IsPortAlreadyExists": IsPortAlreadyExists,
		"IsNotImplemented": IsNotImplemented, "IsInvalidIP": IsInvalidIP, "IsHNSNotRunning": IsHNSNotRunning,
	} {
		if is(nil) || is(plain) {
			t.Errorf("%s(nil or a plain error) = true", name)
		}
	}
	if !IsHNSNotRunning(Errorf(KindOther, "hnsCall failed (%s)", ErrorCodeHNSNotRunning)) {
		t.Errorf("HNS not running not recognised")
	}
	inner := errors.New("inner")
	if e := Errorf(KindNotFound, "x: %w", inner); !errors.Is(e, inner) || !IsNotFound(e) {
		t.Errorf("Errorf does not wrap")
	}
}

func TestLoadBalancerHelpers(t *testing.T) {
	lb := &LoadBalancer{FrontendVIPs: []string{"10.0.0.1"}, Endpoints: []string{"a"}, Flags: LoadBalancerFlagsIPv6 | LoadBalancerFlagsDSR,
		PortMappings: []PortMapping{{Protocol: 6}}}
	c := lb.Clone()
	c.Endpoints[0], c.FrontendVIPs[0], c.PortMappings[0].Protocol = "b", "x", 17
	if lb.Endpoints[0] != "a" || lb.VIP() != "10.0.0.1" || lb.PortMappings[0].Protocol != 6 {
		t.Errorf("Clone shares slices with the original")
	}
	if !lb.IsIPv6() || (&LoadBalancer{}).IsIPv6() || (&LoadBalancer{}).VIP() != "" {
		t.Errorf("IsIPv6/VIP wrong")
	}
	if !(&Network{Type: "Overlay"}).IsOverlay() || (&Network{Type: NetworkTypeL2Bridge}).IsOverlay() {
		t.Errorf("IsOverlay wrong")
	}
}
