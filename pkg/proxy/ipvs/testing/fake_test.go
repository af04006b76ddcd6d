package testing

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

func TestFakeNetlinkHandle(t *testing.T) {
	h := NewFakeNetlinkHandle(false)
	if err := h.SetLocalAddresses("eth0", "10.0.0.1", "127.0.0.1", "fd00::1"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.EnsureAddressBind("172.30.0.1", "kube-ipvs0"); err == nil {
		t.Error("binding to a missing interface succeeded")
	}
	if exist, err := h.EnsureDummyDevice("kube-ipvs0"); exist || err != nil {
		t.Fatalf("EnsureDummyDevice: %v, %v", exist, err)
	}
	if exist, _ := h.EnsureDummyDevice("kube-ipvs0"); !exist {
		t.Error("second EnsureDummyDevice did not find the device")
	}
	for _, a := range []string{"172.30.0.1", "172.30.0.2"} {
		if exist, err := h.EnsureAddressBind(a, "kube-ipvs0"); exist || err != nil {
			t.Fatalf("bind %s: %v, %v", a, exist, err)
		}
	}
	if exist, _ := h.EnsureAddressBind("172.30.0.1", "kube-ipvs0"); !exist {
		t.Error("rebinding did not report the address bound")
	}
	for _, tc := range []struct {
		name string
		got  func() (sets.Set[string], error)
		want []string
	}{
		{"all", h.GetAllLocalAddresses, []string{"10.0.0.1", "172.30.0.1", "172.30.0.2"}},
		{"dummy", func() (sets.Set[string], error) { return h.GetLocalAddresses("kube-ipvs0") }, []string{"172.30.0.1", "172.30.0.2"}},
		{"except dummy", func() (sets.Set[string], error) { return h.GetAllLocalAddressesExcept("kube-ipvs0") }, []string{"10.0.0.1"}},
	} {
		got, err := tc.got()
		if err != nil || !got.Equal(sets.New(tc.want...)) {
			t.Errorf("%s: %v (%v), want %v", tc.name, sets.List(got), err, tc.want)
		}
	}
	if err := h.UnbindAddress("172.30.0.1", "kube-ipvs0"); err != nil {
		t.Fatal(err)
	}
	if err := h.UnbindAddress("172.30.0.1", "kube-ipvs0"); err == nil {
		t.Error("unbinding a missing address succeeded")
	}
	if err := h.DeleteDummyDevice("kube-ipvs0"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ListBindAddress("kube-ipvs0"); err == nil {
		t.Error("listing a deleted interface succeeded")
	}

	v6 := NewFakeNetlinkHandle(true)
	_ = v6.SetLocalAddresses("eth0", "10.0.0.1", "fd00::1", "fe80::1", "::1")
	if got, _ := v6.GetAllLocalAddresses(); !got.Equal(sets.New("fd00::1")) {
		t.Errorf("IPv6 handle lists %v, want only fd00::1 (no IPv4, link-local or loopback)", sets.List(got))
	}
}
