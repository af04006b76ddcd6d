package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// File is one entry of the image's single layer.
type File struct {
	// Path inside the image, absolute ("/bin/sh").
	Path string
	// Mode holds the permission bits; the type comes from the other fields.
	Mode fs.FileMode
	// Source is a file on this machine whose content is copied; Data is used when empty.
	Source string
	Data   []byte
	// Linkname makes the entry a symbolic link to it.
	Linkname string
	// Dir makes the entry a directory.
	Dir bool
}

// Config is the part of the image configuration the runtime reads when a pod names no
// command of its own.
type Config struct {
	Entrypoint   []string
	Cmd          []string
	Env          []string
	WorkingDir   string
	ExposedPorts []string // "80/tcp"
}

// epoch is the timestamp of every entry and of the image: the same inputs give the same
// image ID on every run, so a re-import is a no-op.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Write writes a docker-archive tarball holding one image of one layer, tagged with every
// name in tags (full references such as "registry.k8s.io/pause:3.10.2").
func Write(w io.Writer, files []File, cfg Config, tags []string) error {
	if len(tags) == 0 {
		return fmt.Errorf("image has no tag")
	}
	layer, err := buildLayer(files)
	if err != nil {
		return err
	}
	layerSum := sha256.Sum256(layer)
	diffID := "sha256:" + hex.EncodeToString(layerSum[:])

	ports := map[string]struct{}{}
	for _, p := range cfg.ExposedPorts {
		ports[p] = struct{}{}
	}
	env := cfg.Env
	if len(env) == 0 {
		env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	type runConfig struct {
		Entrypoint   []string            `json:"Entrypoint,omitempty"`
		Cmd          []string            `json:"Cmd,omitempty"`
		Env          []string            `json:"Env,omitempty"`
		WorkingDir   string              `json:"WorkingDir,omitempty"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	}
	imageConfig := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": runConfig{
			Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd, Env: env,
			WorkingDir: cfg.WorkingDir, ExposedPorts: ports,
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"history": []map[string]string{{"created": epoch.Format(time.RFC3339), "created_by": "k8s.io/kube-proxy/test/conformance/ociimage"}},
	}
	configJSON, err := json.Marshal(imageConfig)
	if err != nil {
		return fmt.Errorf("encoding image config: %w", err)
	}
	configSum := sha256.Sum256(configJSON)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := hex.EncodeToString(layerSum[:]) + "/layer.tar"

	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": tags,
		"Layers":   []string{layerName},
	}})
	if err != nil {
		return fmt.Errorf("encoding manifest: %w", err)
	}

	tw := tar.NewWriter(w)
	for _, e := range []struct {
		name string
		data []byte
	}{
		{configName, configJSON},
		{path.Dir(layerName) + "/", nil},
		{layerName, layer},
		{"manifest.json", manifest},
	} {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: epoch, Typeflag: tar.TypeReg}
		if strings.HasSuffix(e.name, "/") {
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("writing %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return fmt.Errorf("writing %s: %w", e.name, err)
		}
	}
	return tw.Close()
}

// buildLayer returns the layer tar: every file, with each parent directory created first
// (runtimes extract in order and a missing parent fails the unpack).
func buildLayer(files []File) ([]byte, error) {
	entries := map[string]File{}
	for _, f := range files {
		p := path.Clean("/" + f.Path)
		if p == "/" {
			continue
		}
		f.Path = p
		entries[p] = f
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = File{Path: d, Dir: true, Mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names) // a parent sorts before its children

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		f := entries[n]
		hdr := &tar.Header{Name: strings.TrimPrefix(n, "/"), Mode: int64(f.Mode.Perm()), ModTime: epoch, Format: tar.FormatPAX}
		if f.Mode&fs.ModeSticky != 0 {
			hdr.Mode |= 0o1000
		}
		var data []byte
		switch {
		case f.Dir:
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		case f.Linkname != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Linkname, 0o777
		default:
			hdr.Typeflag = tar.TypeReg
			data = f.Data
			if f.Source != "" {
				var err error
				if data, err = os.ReadFile(f.Source); err != nil {
					return nil, fmt.Errorf("reading %s for image path %s: %w", f.Source, n, err)
				}
			}
			hdr.Size = int64(len(data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", n, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", n, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// HostBinary returns the entries that make a dynamically linked binary of this machine run
// in an image: the binary at the same path and every shared library and the loader that
// ldd names, each at its resolved path with its symlinked name beside it. A static binary
// yields only itself.
func HostBinary(bin string) ([]File, error) {
	st, err := os.Stat(bin)
	if err != nil {
		return nil, fmt.Errorf("host binary %s: %w", bin, err)
	}
	files := []File{{Path: bin, Source: bin, Mode: st.Mode().Perm()}}
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		// ldd exits non-zero for "not a dynamic executable": nothing to add.
		return files, nil
	}
	for _, line := range strings.Split(string(out), "\n") {
		lib := libraryPath(line)
		if lib == "" {
			continue
		}
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			return nil, fmt.Errorf("library %s of %s: %w", lib, bin, err)
		}
		files = append(files, File{Path: real, Source: real, Mode: 0o755})
		if real != lib {
			files = append(files, File{Path: lib, Linkname: real})
		}
	}
	return files, nil
}

// libraryPath picks the absolute library path out of one line of ldd output:
// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)".
func libraryPath(line string) string {
	line = strings.TrimSpace(line)
	if i := strings.Index(line, "=>"); i >= 0 {
		line = strings.TrimSpace(line[i+2:])
	}
	f := strings.Fields(line)
	if len(f) == 0 || !strings.HasPrefix(f[0], "/") {
		return ""
	}
	return f[0]
}

// Busybox returns the entries of a busybox binary installed at /bin/busybox with a
// symlink in /bin for every applet it lists, skipping names in keep (files the image
// provides itself).
func Busybox(bin string, keep map[string]bool) ([]File, error) {
	out, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("listing applets of %s: %w", bin, err)
	}
	files := []File{{Path: "/bin/busybox", Source: bin, Mode: 0o755}}
	for _, applet := range strings.Fields(string(out)) {
		p := "/bin/" + applet
		if applet == "busybox" || keep[p] {
			continue
		}
		files = append(files, File{Path: p, Linkname: "busybox"})
	}
	return files, nil
}
