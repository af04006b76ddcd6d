package app

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

func TestChooseDualStack(t *testing.T) {
	v4, v6 := v1.IPv4Protocol, v1.IPv6Protocol
	tests := []struct {
		name             string
		primary          v1.IPFamily
		policy           kubeproxyconfig.IPFamilyPolicy
		ipv4, ipv6, dual bool
		want             bool
		wantErr          string
	}{
		{name: "both supported, no policy", primary: v4, ipv4: true, ipv6: true, dual: true, want: true},
		{name: "both supported, PreferDualStack", primary: v6, policy: kubeproxyconfig.IPFamilyPolicyPreferDualStack, ipv4: true, ipv6: true, dual: true, want: true},
		{name: "both supported, SingleStack", primary: v4, policy: kubeproxyconfig.IPFamilyPolicySingleStack, ipv4: true, ipv6: true, dual: true},
		{name: "both supported, RequireDualStack", primary: v4, policy: kubeproxyconfig.IPFamilyPolicyRequireDualStack, ipv4: true, ipv6: true, dual: true, want: true},
		{name: "IPv4 only", primary: v4, ipv4: true},
		{name: "IPv4 only, RequireDualStack", primary: v4, policy: kubeproxyconfig.IPFamilyPolicyRequireDualStack, ipv4: true,
			wantErr: "ipFamilyPolicy RequireDualStack: this host cannot proxy both IPv4 (supported: true) and IPv6 (supported: false)"},
		{name: "primary family unsupported", primary: v6, ipv4: true, wantErr: `no support for primary IP family "IPv6"`},
		{name: "primary family unsupported beats SingleStack", primary: v4, policy: kubeproxyconfig.IPFamilyPolicySingleStack, ipv6: true,
			wantErr: `no support for primary IP family "IPv4"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := chooseDualStack(tc.primary, tc.policy, tc.ipv4, tc.ipv6, tc.dual)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("dual-stack = %v, want %v", got, tc.want)
			}
		})
	}
}
