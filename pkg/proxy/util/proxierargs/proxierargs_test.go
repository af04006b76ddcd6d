package proxierargs

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  *kubeproxyconfig.KubeProxyConfiguration
		family  v1.IPFamily
		wantErr string
	}{
		{name: "IPv4", config: &kubeproxyconfig.KubeProxyConfiguration{}, family: v1.IPv4Protocol},
		{name: "IPv6", config: &kubeproxyconfig.KubeProxyConfiguration{}, family: v1.IPv6Protocol},
		{name: "nil configuration", family: v1.IPv4Protocol, wantErr: "iptables proxier (IPv4): nil configuration"},
		{name: "no family", config: &kubeproxyconfig.KubeProxyConfiguration{}, wantErr: `iptables proxier: invalid IP family ""`},
		{name: "bad family", config: &kubeproxyconfig.KubeProxyConfiguration{}, family: "IPv5", wantErr: `iptables proxier: invalid IP family "IPv5"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check("iptables", tc.config, tc.family)
			if got := errText(err); got != tc.wantErr {
				t.Errorf("Check() = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

func TestMasqueradeMark(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bit      *int32
		wantBit  int
		wantMark string
		wantErr  string
	}{
		{name: "default", wantBit: 14, wantMark: "0x00004000"},
		{name: "lowest", bit: ptr.To[int32](0), wantBit: 0, wantMark: "0x00000001"},
		{name: "bit 20", bit: ptr.To[int32](20), wantBit: 20, wantMark: "0x00100000"},
		{name: "highest", bit: ptr.To[int32](31), wantBit: 31, wantMark: "0x80000000"},
		{name: "negative", bit: ptr.To[int32](-1), wantErr: "nftables proxier (IPv6): nftables.masqueradeBit -1 out of range [0, 31]"},
		{name: "too high", bit: ptr.To[int32](32), wantErr: "nftables proxier (IPv6): nftables.masqueradeBit 32 out of range [0, 31]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bit, mark, err := MasqueradeMark("nftables", v1.IPv6Protocol, "nftables.masqueradeBit", tc.bit)
			if got := errText(err); got != tc.wantErr {
				t.Fatalf("error %q, want %q", got, tc.wantErr)
			}
			if bit != tc.wantBit || mark != tc.wantMark {
				t.Errorf("got bit %d mark %q, want %d %q", bit, mark, tc.wantBit, tc.wantMark)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
