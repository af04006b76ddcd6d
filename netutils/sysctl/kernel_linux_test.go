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
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// inPrivateNetns runs fn on an OS thread moved into a fresh network namespace. The thread is
// never unlocked, so the runtime discards it when the goroutine ends instead of reusing a
// thread that sits in the wrong namespace.
func inPrivateNetns(t *testing.T, fn func() error) error {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// TestKernelPerNamespace changes per-namespace net parameters inside a private namespace and
// checks that the change is visible there and not on the host.
func TestKernelPerNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	s := New()
	for _, name := range []string{"net/ipv4/conf/all/route_localnet", "net.ipv4.ip_forward"} {
		t.Run(name, func(t *testing.T) {
			hostBefore, err := s.GetSysctl(name)
			if err != nil {
				t.Fatalf("reading host %s: %v", name, err)
			}
			var nsBefore, nsAfter int
			err = inPrivateNetns(t, func() error {
				var err error
				if nsBefore, err = s.GetSysctl(name); err != nil {
					return err
				}
				if err := s.SetSysctl(name, 1-nsBefore); err != nil {
					return err
				}
				nsAfter, err = s.GetSysctl(name)
				return err
			})
			if err != nil {
				t.Fatalf("in private netns: %v", err)
			}
			if nsBefore != 0 && nsBefore != 1 {
				t.Fatalf("%s in a fresh namespace = %d, want 0 or 1", name, nsBefore)
			}
			if nsAfter != 1-nsBefore {
				t.Errorf("%s in namespace after set = %d, want %d", name, nsAfter, 1-nsBefore)
			}
			hostAfter, err := s.GetSysctl(name)
			if err != nil {
				t.Fatalf("re-reading host %s: %v", name, err)
			}
			if hostAfter != hostBefore {
				t.Errorf("host %s changed from %d to %d: the write escaped the namespace", name, hostBefore, hostAfter)
			}
		})
	}
}

// TestKernelRejectsOutOfRange checks that the kernel's refusal of a value reaches the caller
// as EINVAL and leaves the parameter unchanged.
func TestKernelRejectsOutOfRange(t *testing.T) {
	const name = "net/ipv4/tcp_ecn" // per-namespace, range 0..2 (proc_dou8vec_minmax)
	var before, after int
	var setErr error
	err := inPrivateNetns(t, func() error {
		s := New()
		var err error
		if before, err = s.GetSysctl(name); err != nil {
			return err
		}
		setErr = s.SetSysctl(name, 7)
		after, err = s.GetSysctl(name)
		return err
	})
	if err != nil {
		t.Fatalf("in private netns: %v", err)
	}
	if !errors.Is(setErr, unix.EINVAL) {
		t.Errorf("SetSysctl(%s, 7) error = %v, want EINVAL", name, setErr)
	}
	if after != before {
		t.Errorf("%s changed from %d to %d after a refused write", name, before, after)
	}
}
