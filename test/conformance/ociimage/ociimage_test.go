package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// readTar returns the regular-file contents and the ordered names of a tarball.
func readTar(t *testing.T, data []byte) (map[string][]byte, []string, map[string]*tar.Header) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	contents := map[string][]byte{}
	headers := map[string]*tar.Header{}
	var order []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading tar: %v", err)
		}
		b, _ := io.ReadAll(tr)
		contents[hdr.Name] = b
		headers[hdr.Name] = hdr
		order = append(order, hdr.Name)
	}
	return contents, order, headers
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name      string
		files     []File
		tags      []string
		wantErr   bool
		wantOrder []string // layer entries in order
		wantLink  map[string]string
	}{
		{
			name:      "parents created before children",
			files:     []File{{Path: "/usr/bin/tool", Data: []byte("x"), Mode: 0o755}},
			tags:      []string{"registry.k8s.io/e2e-test-images/agnhost:2.66.1"},
			wantOrder: []string{"usr/", "usr/bin/", "usr/bin/tool"},
		},
		{
			name: "symlinks and two tags",
			files: []File{
				{Path: "/bin/busybox", Data: []byte("bb"), Mode: 0o755},
				{Path: "/bin/sh", Linkname: "busybox"},
			},
			tags:      []string{"a/b:1", "a/b:2"},
			wantOrder: []string{"bin/", "bin/busybox", "bin/sh"},
			wantLink:  map[string]string{"bin/sh": "busybox"},
		},
		{name: "no tag is an error", files: []File{{Path: "/x", Data: []byte("x")}}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tc.files, Config{Entrypoint: []string{"/bin/sh"}}, tc.tags)
			if tc.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			outer, _, _ := readTar(t, buf.Bytes())
			var manifest []struct {
				Config   string
				RepoTags []string
				Layers   []string
			}
			if err := json.Unmarshal(outer["manifest.json"], &manifest); err != nil {
				t.Fatalf("manifest.json: %v", err)
			}
			if len(manifest) != 1 || strings.Join(manifest[0].RepoTags, ",") != strings.Join(tc.tags, ",") {
				t.Fatalf("manifest = %+v, want tags %v", manifest, tc.tags)
			}
			cfgData, ok := outer[manifest[0].Config]
			if !ok {
				t.Fatalf("config %s missing", manifest[0].Config)
			}
			// The config's file name is its digest: that is what the runtime verifies.
			sum := sha256.Sum256(cfgData)
			if hex.EncodeToString(sum[:])+".json" != manifest[0].Config {
				t.Errorf("config name %s is not its digest", manifest[0].Config)
			}
			var cfg struct {
				RootFS struct {
					DiffIDs []string `json:"diff_ids"`
				} `json:"rootfs"`
			}
			if err := json.Unmarshal(cfgData, &cfg); err != nil {
				t.Fatal(err)
			}
			layer := outer[manifest[0].Layers[0]]
			lsum := sha256.Sum256(layer)
			if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != "sha256:"+hex.EncodeToString(lsum[:]) {
				t.Errorf("diff_ids %v do not match the layer digest", cfg.RootFS.DiffIDs)
			}
			_, order, headers := readTar(t, layer)
			if strings.Join(order, " ") != strings.Join(tc.wantOrder, " ") {
				t.Errorf("layer order = %v, want %v", order, tc.wantOrder)
			}
			for name, target := range tc.wantLink {
				if h := headers[name]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != target {
					t.Errorf("%s: header %+v, want symlink to %s", name, h, target)
				}
			}
		})
	}
}

func TestLibraryPath(t *testing.T) {
	tests := map[string]string{
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)": "/lib/x86_64-linux-gnu/libc.so.6",
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f)":                  "/lib64/ld-linux-x86-64.so.2",
		"\tlinux-vdso.so.1 (0x00007ffd)":                            "",
		"\tnot a dynamic executable":                                "",
	}
	for line, want := range tests {
		if got := libraryPath(line); got != want {
			t.Errorf("libraryPath(%q) = %q, want %q", line, got, want)
		}
	}
}

func TestHostBinary(t *testing.T) {
	if _, err := exec.LookPath("ldd"); err != nil {
		t.Skip("ldd not installed")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	files, err := HostBinary(sh)
	if err != nil {
		t.Fatal(err)
	}
	var libc bool
	for _, f := range files {
		if strings.Contains(f.Path, "libc.so") {
			libc = true
		}
	}
	if !libc {
		t.Errorf("HostBinary(%s) = %+v, want libc among the entries", sh, files)
	}
}
