package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// TestSocketLBFlagsAndConfig: --socket-lb and --socket-lb-cgroup-path and a v1alpha2
// file's socketLB section end up in one effective setting (a flag given on the command
// line wins, field by field), which is what validation checks, with errors naming the
// field, the value and the flag.
func TestSocketLBFlagsAndConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config string // a v1alpha2 file's body after the header; "" for no file
		args   []string
		want   kubeproxyconfig.KubeProxySocketLBConfiguration
		errs   []string // substrings of the error; none for success
	}{
		{name: "off by default", args: []string{"--proxy-mode=nftables"}},
		{name: "flag", args: []string{"--proxy-mode=nftables", "--socket-lb"},
			want: kubeproxyconfig.KubeProxySocketLBConfiguration{Enabled: true}},
		{name: "flags with path", args: []string{"--proxy-mode=iptables", "--socket-lb", "--socket-lb-cgroup-path=/sys/fs/cgroup/unified/pods"},
			want: kubeproxyconfig.KubeProxySocketLBConfiguration{Enabled: true, CgroupPath: "/sys/fs/cgroup/unified/pods"}},
		{name: "file", config: "mode: nftables\nsocketLB:\n  enabled: true\n  cgroupPath: /sys/fs/cgroup/pods\n",
			want: kubeproxyconfig.KubeProxySocketLBConfiguration{Enabled: true, CgroupPath: "/sys/fs/cgroup/pods"}},
		{name: "flag turns the file's setting off", config: "mode: nftables\nsocketLB:\n  enabled: true\n", args: []string{"--socket-lb=false"}},
		{name: "flag path over the file's", config: "mode: nftables\nsocketLB:\n  enabled: true\n  cgroupPath: /sys/fs/cgroup/a\n",
			args: []string{"--socket-lb-cgroup-path=/sys/fs/cgroup/b"},
			want: kubeproxyconfig.KubeProxySocketLBConfiguration{Enabled: true, CgroupPath: "/sys/fs/cgroup/b"}},
		{name: "flag enables the file's path", config: "mode: nftables\nsocketLB:\n  cgroupPath: /sys/fs/cgroup/a\n", args: []string{"--socket-lb"},
			want: kubeproxyconfig.KubeProxySocketLBConfiguration{Enabled: true, CgroupPath: "/sys/fs/cgroup/a"}},
		{name: "ipvs by flag", args: []string{"--proxy-mode=ipvs", "--socket-lb"},
			errs: []string{"KubeProxyConfiguration.SocketLB.Enabled: Invalid value: true", `not "ipvs"`, "--socket-lb"}},
		{name: "ipvs in the file", config: "mode: ipvs\nsocketLB:\n  enabled: true\n",
			errs: []string{"KubeProxyConfiguration.SocketLB.Enabled: Invalid value: true", `not "ipvs"`, "socketLB.enabled"}},
		{name: "path without the flag", args: []string{"--proxy-mode=nftables", "--socket-lb-cgroup-path=/x"},
			errs: []string{`KubeProxyConfiguration.SocketLB.CgroupPath: Invalid value: "/x"`, "--socket-lb"}},
		{name: "relative path in the file", config: "mode: nftables\nsocketLB:\n  enabled: true\n  cgroupPath: pods\n",
			errs: []string{`KubeProxyConfiguration.SocketLB.CgroupPath: Invalid value: "pods"`, "socketLB.cgroupPath"}},
		{name: "unknown field in the section", config: "mode: nftables\nsocketLB:\n  enable: true\n",
			errs: []string{"enable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.config != "" {
				args = append([]string{"--config=" + writeConfig(t, v1alpha2Header+tc.config)}, args...)
			}
			o, err := parseAndComplete(t, args)
			if len(tc.errs) > 0 {
				if err == nil {
					t.Fatalf("no error, want one containing %q", tc.errs)
				}
				for _, w := range tc.errs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if o.config.SocketLB != tc.want {
				t.Errorf("config socketLB %+v, want %+v", o.config.SocketLB, tc.want)
			}
			if got := (kubeproxyconfig.KubeProxySocketLBConfiguration{Enabled: o.socketLB.enabled, CgroupPath: o.socketLB.cgroupPath}); got != tc.want {
				t.Errorf("what runs: %+v, want %+v (the config says %+v)", got, tc.want, o.config.SocketLB)
			}
		})
	}
}

// TestSocketLBWriteConfig: the flags are written to a v1alpha2 file as socketLB, and
// reading that file back gives the same setting; a file without socket LB has no
// socketLB section.
func TestSocketLBWriteConfig(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string
		wantNot string
	}{
		{args: []string{"--proxy-mode=nftables", "--socket-lb", "--socket-lb-cgroup-path=/sys/fs/cgroup/pods"},
			want: "socketLB:\n  cgroupPath: /sys/fs/cgroup/pods\n  enabled: true\n"},
		{args: []string{"--proxy-mode=nftables"}, wantNot: "socketLB"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.yaml")
			o, err := parseAndComplete(t, append([]string{"--write-config-to=" + path}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			if err := o.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && !strings.Contains(string(data), tc.want) {
				t.Errorf("written file lacks %q:\n%s", tc.want, data)
			}
			if tc.wantNot != "" && strings.Contains(string(data), tc.wantNot) {
				t.Errorf("written file has %q:\n%s", tc.wantNot, data)
			}
			back, err := parseAndComplete(t, []string{"--config=" + path})
			if err != nil {
				t.Fatal(err)
			}
			want, _ := parseAndComplete(t, tc.args)
			if back.config.SocketLB != want.config.SocketLB {
				t.Errorf("read back %+v, want %+v", back.config.SocketLB, want.config.SocketLB)
			}
		})
	}
}
