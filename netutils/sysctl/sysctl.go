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
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Names and values kept identical to k8s.io/component-helpers/node/util/sysctl so that code
// written against it can switch imports without changes.
const (
	// VMOvercommitMemory selects the kernel's memory over-commit policy.
	VMOvercommitMemory = "vm/overcommit_memory"
	// VMPanicOnOOM selects whether the kernel panics instead of running the OOM killer.
	VMPanicOnOOM = "vm/panic_on_oom"
	// KernelPanic is the number of seconds the kernel waits after a panic before rebooting.
	KernelPanic = "kernel/panic"
	// KernelPanicOnOops selects whether an oops or BUG escalates to a panic.
	KernelPanicOnOops = "kernel/panic_on_oops"
	// RootMaxKeys bounds the number of keys that UID 0 of the root user namespace may own.
	RootMaxKeys = "kernel/keys/root_maxkeys"
	// RootMaxBytes bounds the total payload size of the keys owned by UID 0.
	RootMaxBytes = "kernel/keys/root_maxbytes"

	// VMOvercommitMemoryAlways disables over-commit accounting.
	VMOvercommitMemoryAlways = 1
	// VMPanicOnOOMInvokeOOMKiller makes the kernel run the OOM killer rather than panic.
	VMPanicOnOOMInvokeOOMKiller = 0

	// KernelPanicOnOopsAlways escalates every oops to a panic.
	KernelPanicOnOopsAlways = 1
	// KernelPanicRebootTimeout is the reboot delay, in seconds, after a panic.
	KernelPanicRebootTimeout = 10

	// RootMaxKeysSetting is high because container runtimes create one key per container.
	RootMaxKeysSetting = 1000000
	// RootMaxBytesSetting allows 25 bytes of payload for each of RootMaxKeysSetting keys.
	RootMaxBytesSetting = RootMaxKeysSetting * 25
)

// DefaultRoot is where the kernel exposes its parameters.
const DefaultRoot = "/proc/sys"

// Interface reads and writes integer kernel parameters.
type Interface interface {
	// GetSysctl returns the current value of the named parameter, or -1 and an error.
	GetSysctl(sysctl string) (int, error)
	// SetSysctl writes newVal to the named parameter.
	SetSysctl(sysctl string, newVal int) error
}

// New returns an Interface backed by /proc/sys.
func New() Interface {
	return &procSysctl{root: DefaultRoot}
}

// NewWithRoot returns an Interface that treats root as /proc/sys. It exists so tests can point
// the real implementation at a scratch directory.
func NewWithRoot(root string) Interface {
	return &procSysctl{root: root}
}

type procSysctl struct {
	root string
}

func (p *procSysctl) GetSysctl(sysctl string) (int, error) {
	file, err := p.file(sysctl)
	if err != nil {
		return -1, err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return -1, fmt.Errorf("reading sysctl %q: %w", sysctl, err)
	}
	text := strings.TrimSpace(string(data))
	val, err := strconv.Atoi(text)
	if err != nil {
		return -1, fmt.Errorf("sysctl %q has non-integer value %q: %w", sysctl, text, err)
	}
	return val, nil
}

func (p *procSysctl) SetSysctl(sysctl string, newVal int) error {
	file, err := p.file(sysctl)
	if err != nil {
		return err
	}
	// No O_CREATE: a missing file means the kernel does not have this parameter (or the module
	// providing it is not loaded), and that should surface as "not exist", not as a stray file.
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("opening sysctl %q for writing: %w", sysctl, err)
	}
	_, werr := f.Write([]byte(strconv.Itoa(newVal)))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("setting sysctl %q to %d: %w", sysctl, newVal, err)
	}
	return nil
}

// PathName returns the name in the slash notation used for files below /proc/sys, accepting
// either notation. It rejects names that are empty, absolute, or contain empty, "." or ".."
// components, so a name can never address a file outside the sysctl tree.
func PathName(sysctl string) (string, error) {
	return pathName(sysctl)
}

// file maps a parameter name to its path below the root, refusing names that would escape it.
func (p *procSysctl) file(sysctl string) (string, error) {
	rel, err := pathName(sysctl)
	if err != nil {
		return "", err
	}
	return filepath.Join(p.root, rel), nil
}

// pathName converts a parameter name in either notation to the slash notation used for the
// file below /proc/sys, and validates it.
func pathName(sysctl string) (string, error) {
	if sysctl == "" {
		return "", errors.New("empty sysctl name")
	}
	name := sysctl
	// In the dotted notation '/' stands for a literal '.' inside a component (VLAN interface
	// names such as eth0.100), so the two separators swap roles.
	if i := strings.IndexAny(name, "./"); i >= 0 && name[i] == '.' {
		name = swapSeparators(name)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("invalid sysctl name %q: must be relative to /proc/sys", sysctl)
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return "", fmt.Errorf("invalid sysctl name %q: empty, . or .. path component", sysctl)
		}
	}
	return name, nil
}

// NormalizeName returns a parameter name in the dotted notation of sysctl(8). A name already
// in dotted notation is returned unchanged; a name in slash notation has its '.' and '/'
// swapped, so "net/ipv4/conf/eth0.100/rp_filter" becomes "net.ipv4.conf.eth0/100.rp_filter".
func NormalizeName(val string) string {
	i := strings.IndexAny(val, "./")
	if i < 0 || val[i] == '.' {
		return val
	}
	return swapSeparators(val)
}

// swapSeparators exchanges '.' and '/' byte by byte; both are ASCII, so this leaves every
// other byte, including invalid UTF-8, untouched (strings.Map would replace it with U+FFFD).
func swapSeparators(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch c {
		case '.':
			b[i] = '/'
		case '/':
			b[i] = '.'
		}
	}
	return string(b)
}
