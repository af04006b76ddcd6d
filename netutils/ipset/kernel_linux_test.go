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

package ipset_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"k8s.io/net-utils/ipset"
)

// TestKernelScenario runs the scenario against the ipset binary in a private network
// namespace (IP sets are per namespace, so the host's sets are never touched).
func TestKernelScenario(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace and manage IP sets")
	}
	if _, err := exec.LookPath(ipset.IPSetCmd); err != nil {
		t.Skip("needs the ipset binary")
	}
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: the runtime discards it when this goroutine ends.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		ips := ipset.New()
		if names, err := ips.ListSets(); err != nil || len(names) != 0 {
			errc <- fmt.Errorf("fresh namespace has sets %q (%v): not isolated", names, err)
			return
		}
		v, err := ips.GetVersion()
		if err != nil {
			errc <- err
			return
		}
		t.Logf("ipset version %s", v)
		errc <- scenario(ips)
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// BenchmarkKernelFill measures filling a set with 500 entries on the real binary, one process
// per entry (the upstream API) against one ipset restore (Batch), in a private namespace.
func BenchmarkKernelFill(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to create a network namespace and manage IP sets")
	}
	if _, err := exec.LookPath(ipset.IPSetCmd); err != nil {
		b.Skip("needs the ipset binary")
	}
	const n = 500
	entries := make([]string, n)
	for i := range entries {
		entries[i] = (&ipset.Entry{IP: fmt.Sprintf("198.18.%d.%d", i/250, 1+i%250), Port: 80, Protocol: ipset.ProtocolTCP, SetType: ipset.HashIPPort}).String()
	}
	set := &ipset.IPSet{Name: "KUBE-BENCH", SetType: ipset.HashIPPort}
	fills := map[string]func(ipset.Interface) error{
		"per-entry": func(ips ipset.Interface) error {
			for _, e := range entries {
				if err := ips.AddEntry(e, set, false); err != nil {
					return err
				}
			}
			return nil
		},
		"restore": func(ips ipset.Interface) error {
			var batch ipset.Batch
			for _, e := range entries {
				batch.Add(set.Name, e)
			}
			return ips.(ipset.Restorer).Restore(&batch, false)
		},
	}
	for _, name := range []string{"per-entry", "restore"} {
		fill := fills[name]
		b.Run(fmt.Sprintf("%s/entries=%d", name, n), func(b *testing.B) {
			errc := make(chan error, 1)
			go func() {
				runtime.LockOSThread()
				if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
					errc <- err
					return
				}
				ips := ipset.New()
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					if err := ips.CreateSet(set, false); err != nil {
						errc <- err
						return
					}
					b.StartTimer()
					if err := fill(ips); err != nil {
						errc <- err
						return
					}
					b.StopTimer()
					if got, err := ips.ListEntries(set.Name); err != nil || len(got) != n {
						errc <- fmt.Errorf("set has %d entries (%v), want %d", len(got), err, n)
						return
					}
					if err := ips.DestroySet(set.Name); err != nil {
						errc <- err
						return
					}
					b.StartTimer()
				}
				errc <- nil
			}()
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		})
	}
}
