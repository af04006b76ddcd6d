//go:build linux

package iptables

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy"
)

// TestValidServicePort: the iptables Validator refuses only what it cannot
// write into a rule comment; every other reason is the Shell's
// (syncshell's TestMadeTypes and TestShellValidation).
func TestValidServicePort(t *testing.T) {
	b := &rulesBackend{logger: klog.Background()}
	for _, tc := range []struct {
		name, portName string
		svc            proxy.ServicePort // nil: newServiceInfo's for portName
		want           bool
	}{
		{name: "plain name", portName: "http", want: true},
		{name: "quote in the name", portName: `h"ttp`, want: false},
		{name: "space in the name", portName: "h ttp", want: false},
		{name: "not ours: left to the Shell", svc: &proxy.BaseServicePortInfo{}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := tc.svc
			if svc == nil {
				svc = newServiceInfo(&v1.ServicePort{Name: tc.portName}, &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc"}},
					&proxy.BaseServicePortInfo{})
			}
			name := proxy.ServicePortName{Port: tc.portName}
			name.Namespace, name.Name = "ns", "svc"
			if got := b.ValidServicePort(name, svc); got != tc.want {
				t.Errorf("ValidServicePort(%q) = %v, want %v", tc.portName, got, tc.want)
			}
		})
	}
}
