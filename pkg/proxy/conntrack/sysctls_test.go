//go:build linux

package conntrack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fakesysctl "k8s.io/net-utils/sysctl/testing"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

func TestSysctlsApply(t *testing.T) {
	full := &kubeproxyconfig.KubeProxyConntrackConfiguration{
		MaxPerCore:            ptr.To[int32](32768),
		Min:                   ptr.To[int32](131072),
		TCPEstablishedTimeout: &metav1.Duration{Duration: 24 * time.Hour},
		TCPCloseWaitTimeout:   &metav1.Duration{Duration: time.Hour},
		TCPBeLiberal:          true,
		UDPTimeout:            metav1.Duration{Duration: 30 * time.Second},
		UDPStreamTimeout:      metav1.Duration{Duration: 120 * time.Second},
	}
	tests := []struct {
		name         string
		config       *kubeproxyconfig.KubeProxyConntrackConfiguration
		cpus         int
		initial      map[string]int
		hashsize     int
		wantWrites   []fakesysctl.Write
		wantHashsize int
	}{
		{
			name: "everything, max scaled by CPUs", config: full, cpus: 8, hashsize: 16384,
			initial: map[string]int{sysctlMax: 65536},
			wantWrites: []fakesysctl.Write{
				{Name: sysctlMax, Value: 262144},
				{Name: sysctlTCPEstablishedTimeout, Value: 86400},
				{Name: sysctlTCPCloseWaitTimeout, Value: 3600},
				{Name: sysctlTCPBeLiberal, Value: 1},
				{Name: sysctlUDPTimeout, Value: 30},
				{Name: sysctlUDPStreamTimeout, Value: 120},
			},
			wantHashsize: 65536,
		},
		{
			name: "min wins on few CPUs", config: &kubeproxyconfig.KubeProxyConntrackConfiguration{MaxPerCore: ptr.To[int32](32768), Min: ptr.To[int32](131072)},
			cpus: 2, hashsize: 1024, initial: map[string]int{sysctlMax: 1000},
			wantWrites:   []fakesysctl.Write{{Name: sysctlMax, Value: 131072}},
			wantHashsize: 32768,
		},
		{
			name: "capped on huge machines", config: &kubeproxyconfig.KubeProxyConntrackConfiguration{MaxPerCore: ptr.To[int32](32768)},
			cpus: 1024, hashsize: 1024, initial: map[string]int{sysctlMax: 1000},
			wantWrites:   []fakesysctl.Write{{Name: sysctlMax, Value: maxConntrackMax}},
			wantHashsize: maxConntrackMax / 4,
		},
		{
			name: "never lowers a higher max, nor a larger hash", config: &kubeproxyconfig.KubeProxyConntrackConfiguration{MaxPerCore: ptr.To[int32](1000)},
			cpus: 4, hashsize: 100000, initial: map[string]int{sysctlMax: 999999},
			wantHashsize: 100000,
		},
		{
			name: "max per core 0 leaves max and hashsize alone", config: &kubeproxyconfig.KubeProxyConntrackConfiguration{MaxPerCore: ptr.To[int32](0), Min: ptr.To[int32](5)},
			cpus: 4, hashsize: 7, wantHashsize: 7,
		},
		{
			name: "values already set are not rewritten", config: &kubeproxyconfig.KubeProxyConntrackConfiguration{
				TCPEstablishedTimeout: &metav1.Duration{Duration: 24 * time.Hour}, TCPBeLiberal: true},
			cpus: 1, hashsize: 7, initial: map[string]int{sysctlTCPEstablishedTimeout: 86400, sysctlTCPBeLiberal: 1},
			wantHashsize: 7,
		},
		{
			name: "zero timeouts and be_liberal false leave the kernel alone", config: &kubeproxyconfig.KubeProxyConntrackConfiguration{
				TCPEstablishedTimeout: &metav1.Duration{}, TCPCloseWaitTimeout: &metav1.Duration{}},
			cpus: 1, hashsize: 7, wantHashsize: 7,
		},
		{name: "nil config", config: nil, cpus: 1, hashsize: 7, wantHashsize: 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakesysctl.NewFake()
			for k, v := range tc.initial {
				fake.Settings[k] = v
			}
			hashPath := filepath.Join(t.TempDir(), "hashsize")
			if err := os.WriteFile(hashPath, []byte(strconv.Itoa(tc.hashsize)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			s := Sysctls{Sysctl: fake, HashsizePath: hashPath, NumCPU: func() int { return tc.cpus }}
			if err := s.Apply(context.Background(), tc.config); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if !slices.Equal(fake.Writes, tc.wantWrites) {
				t.Errorf("writes = %v, want %v", fake.Writes, tc.wantWrites)
			}
			b, _ := os.ReadFile(hashPath)
			if got, _ := strconv.Atoi(strings.TrimSpace(string(b))); got != tc.wantHashsize {
				t.Errorf("hashsize = %d, want %d", got, tc.wantHashsize)
			}
		})
	}
}

func TestSysctlsApplyErrors(t *testing.T) {
	cfg := &kubeproxyconfig.KubeProxyConntrackConfiguration{
		MaxPerCore:            ptr.To[int32](32768),
		TCPEstablishedTimeout: &metav1.Duration{Duration: time.Hour},
	}
	tests := []struct {
		name     string
		setErr   string
		hashFile string // "" → a valid file, "missing", "garbage"
		wantIn   []string
	}{
		{name: "max write fails", setErr: sysctlMax, wantIn: []string{"nf_conntrack_max", "32768"}},
		{name: "timeout write fails", setErr: sysctlTCPEstablishedTimeout, wantIn: []string{"nf_conntrack_tcp_timeout_established", "3600"}},
		{name: "hashsize missing", hashFile: "missing", wantIn: []string{"hashsize"}},
		{name: "hashsize garbage", hashFile: "garbage", wantIn: []string{"hashsize", "parsing"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakesysctl.NewFake()
			if tc.setErr != "" {
				fake.SetErrors[tc.setErr] = errors.New("read-only file system")
			}
			hashPath := filepath.Join(t.TempDir(), "hashsize")
			switch tc.hashFile {
			case "":
				_ = os.WriteFile(hashPath, []byte("1000000"), 0o600)
			case "garbage":
				_ = os.WriteFile(hashPath, []byte("lots"), 0o600)
			}
			err := Sysctls{Sysctl: fake, HashsizePath: hashPath, NumCPU: func() int { return 1 }}.Apply(context.Background(), cfg)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, s := range tc.wantIn {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}
