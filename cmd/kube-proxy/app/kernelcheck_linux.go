//go:build linux

package app

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// hostKernel reads what kernelInfo asks from the running kernel: /proc for its release
// and loaded modules, /sys/module, and /lib/modules/<release> (modules.builtin,
// modules.dep) for what is built in or can be loaded. It loads nothing.
type hostKernel struct {
	root string // "/" except in tests

	once                      sync.Once
	release                   string
	releaseErr                error
	loaded, builtin, loadable map[string]bool
	modulesKnown              bool
}

func newHostKernel() kernelInfo { return &hostKernel{root: "/"} }

func (h *hostKernel) read() {
	h.once.Do(func() {
		b, err := os.ReadFile(filepath.Join(h.root, "proc/sys/kernel/osrelease"))
		h.release, h.releaseErr = strings.TrimSpace(string(b)), err
		h.loaded = map[string]bool{}
		if b, err := os.ReadFile(filepath.Join(h.root, "proc/modules")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if name, _, ok := strings.Cut(line, " "); ok {
					h.loaded[name] = true
				}
			}
		}
		if h.releaseErr != nil {
			return
		}
		dir := filepath.Join(h.root, "lib/modules", h.release)
		h.builtin = moduleNames(filepath.Join(dir, "modules.builtin"), false)
		h.loadable = moduleNames(filepath.Join(dir, "modules.dep"), true)
		// Without modules.dep nothing says what could be loaded (a container that
		// does not mount /lib/modules), and without modules.builtin nothing says what
		// is built in (a built-in module without parameters has no /sys/module
		// entry): only loaded modules are then known, and nothing is refused.
		h.modulesKnown = h.loadable != nil && h.builtin != nil
	})
}

// moduleNames reads the module paths of modules.builtin ("kernel/net/x.ko" per line) or
// modules.dep ("kernel/net/x.ko.xz: deps..."), as module names; nil if unreadable.
func moduleNames(file string, dep bool) map[string]bool {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		p := sc.Text()
		if dep {
			p, _, _ = strings.Cut(p, ":")
		}
		base := path.Base(strings.TrimSpace(p))
		if i := strings.Index(base, ".ko"); i > 0 {
			names[strings.ReplaceAll(base[:i], "-", "_")] = true
		}
	}
	return names
}

func (h *hostKernel) Release() (string, error) {
	h.read()
	return h.release, h.releaseErr
}

func (h *hostKernel) HasModule(name string) (bool, error) {
	h.read()
	if h.loaded[name] || h.builtin[name] || h.loadable[name] {
		return true, nil
	}
	// A built-in module with parameters shows in /sys/module even when
	// modules.builtin is missing.
	if _, err := os.Stat(filepath.Join(h.root, "sys/module", name)); err == nil {
		return true, nil
	}
	if !h.modulesKnown {
		return false, errKernelModulesUnknown
	}
	return false, nil
}
