/*
Copyright The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package sysctl

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestGetSysctl(t *testing.T) {
	root := writeTree(t, map[string]string{
		"net/ipv4/ip_forward":              "1\n",
		"net/ipv4/conf/eth0.100/rp_filter": "  2 \n",
		"net/netfilter/nf_conntrack_max":   "262144",
		"net/ipv4/tcp_rmem":                "4096\t131072\t6291456\n",
		"kernel/empty":                     "",
		"net/ipv4/conf/all/route_localnet": "-1\n",
	})
	s := NewWithRoot(root)
	tests := []struct {
		name     string
		sysctl   string
		want     int
		wantErr  bool
		notExist bool
	}{
		{name: "slash notation", sysctl: "net/ipv4/ip_forward", want: 1},
		{name: "dotted notation", sysctl: "net.ipv4.ip_forward", want: 1},
		{name: "slash with dotted interface and whitespace", sysctl: "net/ipv4/conf/eth0.100/rp_filter", want: 2},
		{name: "dotted with slashed interface", sysctl: "net.ipv4.conf.eth0/100.rp_filter", want: 2},
		{name: "no trailing newline", sysctl: "net/netfilter/nf_conntrack_max", want: 262144},
		{name: "negative", sysctl: "net/ipv4/conf/all/route_localnet", want: -1},
		{name: "vector value is not an int", sysctl: "net/ipv4/tcp_rmem", wantErr: true},
		{name: "empty file", sysctl: "kernel/empty", wantErr: true},
		{name: "missing", sysctl: "net/ipv4/nope", wantErr: true, notExist: true},
		{name: "empty name", sysctl: "", wantErr: true},
		{name: "absolute", sysctl: "/etc/passwd", wantErr: true},
		{name: "escape", sysctl: "net/../../etc/passwd", wantErr: true},
		{name: "double slash", sysctl: "net//ipv4", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.GetSysctl(tc.sysctl)
			if (err != nil) != tc.wantErr {
				t.Fatalf("GetSysctl(%q) = %d, %v; want error %v", tc.sysctl, got, err, tc.wantErr)
			}
			if tc.notExist && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("GetSysctl(%q) error %v does not wrap fs.ErrNotExist", tc.sysctl, err)
			}
			if err != nil {
				if got != -1 {
					t.Errorf("GetSysctl(%q) returned %d with an error, want -1", tc.sysctl, got)
				}
				return
			}
			if got != tc.want {
				t.Errorf("GetSysctl(%q) = %d, want %d", tc.sysctl, got, tc.want)
			}
		})
	}
}

func TestSetSysctl(t *testing.T) {
	tests := []struct {
		name     string
		sysctl   string
		val      int
		file     string
		wantFile string
		wantErr  bool
	}{
		{name: "overwrite longer value", sysctl: "net/netfilter/nf_conntrack_max", val: 7, file: "net/netfilter/nf_conntrack_max", wantFile: "7"},
		{name: "dotted notation", sysctl: "net.ipv4.ip_forward", val: 1, file: "net/ipv4/ip_forward", wantFile: "1"},
		{name: "negative", sysctl: "net/ipv4/ip_forward", val: -3, file: "net/ipv4/ip_forward", wantFile: "-3"},
		{name: "missing parameter is not created", sysctl: "net/ipv4/nope", val: 1, file: "net/ipv4/nope", wantErr: true},
		{name: "escape refused", sysctl: "../outside", val: 1, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := writeTree(t, map[string]string{
				"net/netfilter/nf_conntrack_max": "262144\n",
				"net/ipv4/ip_forward":            "0\n",
			})
			err := NewWithRoot(root).SetSysctl(tc.sysctl, tc.val)
			if (err != nil) != tc.wantErr {
				t.Fatalf("SetSysctl(%q, %d) error = %v, want error %v", tc.sysctl, tc.val, err, tc.wantErr)
			}
			if tc.file == "" {
				return
			}
			data, rerr := os.ReadFile(filepath.Join(root, tc.file))
			if tc.wantErr {
				if !errors.Is(rerr, fs.ErrNotExist) {
					t.Errorf("failed SetSysctl left %s behind (read error %v)", tc.file, rerr)
				}
				return
			}
			if string(data) != tc.wantFile {
				t.Errorf("file %s = %q, want %q", tc.file, data, tc.wantFile)
			}
			got, err := NewWithRoot(root).GetSysctl(tc.sysctl)
			if err != nil || got != tc.val {
				t.Errorf("read back %q = %d, %v; want %d", tc.sysctl, got, err, tc.val)
			}
		})
	}
}

func TestNormalizeName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"kernel", "kernel"},
		{"net.ipv4.ip_forward", "net.ipv4.ip_forward"},
		{"net/ipv4/ip_forward", "net.ipv4.ip_forward"},
		{"net/ipv4/conf/eno2.100/rp_filter", "net.ipv4.conf.eno2/100.rp_filter"},
		{"net.ipv4.conf.eno2/100.rp_filter", "net.ipv4.conf.eno2/100.rp_filter"},
		{"/net/ipv4", ".net.ipv4"},
	}
	for _, tc := range tests {
		if got := NormalizeName(tc.in); got != tc.want {
			t.Errorf("NormalizeName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPathName(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "net/ipv4/ip_forward", want: "net/ipv4/ip_forward"},
		{in: "net.ipv4.ip_forward", want: "net/ipv4/ip_forward"},
		{in: "net.ipv4.conf.eno2/100.rp_filter", want: "net/ipv4/conf/eno2.100/rp_filter"},
		{in: "net/ipv4/conf/eno2.100/rp_filter", want: "net/ipv4/conf/eno2.100/rp_filter"},
		{in: "vm", want: "vm"},
		{in: "", wantErr: true},
		{in: "/proc/sys/vm", wantErr: true},
		{in: "net/", wantErr: true},
		{in: "net..x", wantErr: true},
		{in: "net/./x", wantErr: true},
		{in: "..", wantErr: true},
	}
	for _, tc := range tests {
		got, err := PathName(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("PathName(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// FuzzPathName checks the invariants that keep SetSysctl inside its root: an accepted name
// never has an empty, "." or ".." component and is never absolute, and both notations of the
// same parameter map to the same file.
func FuzzPathName(f *testing.F) {
	for _, s := range []string{"net/ipv4/ip_forward", "net.ipv4.conf.eth0/1.rp_filter", "..", "/x", "a//b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p, err := PathName(name)
		if err != nil {
			return
		}
		if filepath.IsAbs(p) || !filepath.IsLocal(p) {
			t.Fatalf("PathName(%q) = %q escapes the root", name, p)
		}
		if filepath.Clean(p) != p {
			t.Fatalf("PathName(%q) = %q is not clean", name, p)
		}
		p2, err := PathName(NormalizeName(name))
		if err != nil || p2 != p {
			t.Fatalf("PathName(NormalizeName(%q)) = %q, %v; want %q", name, p2, err, p)
		}
	})
}
