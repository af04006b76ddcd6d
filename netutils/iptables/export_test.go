package iptables

import (
	utilexec "k8s.io/utils/exec"
)

// NewForTest builds a runner for the external (package iptables_test) kernel tests,
// which need the testing package and so cannot be internal tests. It runs the given
// binaries through exec. When restoreWait is false it behaves as with an
// iptables-restore too old for "-w", taking lockPath itself.
func NewForTest(exec utilexec.Interface, protocol Protocol, iptables, save, restore string, restoreWait bool, lockPath string) Interface {
	r := newInternal(exec, protocol, withCommands(iptables, save, restore), withLockFile(lockPath))
	if !restoreWait {
		f := r.Features()
		f.RestoreWait = false
		r.features = f
	}
	return r
}
