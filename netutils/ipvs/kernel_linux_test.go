//go:build linux

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

package ipvs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inPrivateNetns runs fn on a thread in a fresh network namespace (IPVS tables are per
// namespace). The thread is never unlocked, so the runtime discards it afterwards.
func inPrivateNetns(t *testing.T, fn func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// TestKernel runs against the real kernel. Where IPVS is missing (as on kernels built without
// it) it checks that New, NewChecked and Available fail cleanly with ErrNotAvailable. Where
// IPVS is present it round-trips services and destinations in a private namespace.
//
// Available may run "modprobe ip_vs", as upstream kube-proxy does; loading a module changes no
// namespace's rules.
func TestKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace and use IPVS")
	}
	err := inPrivateNetns(t, func() error {
		if err := Available(); err != nil {
			if !errors.Is(err, ErrNotAvailable) {
				return fmt.Errorf("Available() = %v, which does not wrap ErrNotAvailable", err)
			}
			t.Logf("IPVS not available here, checking the failure path: %v", err)
			if ipvs, err := NewChecked(); ipvs != nil || !errors.Is(err, ErrNotAvailable) {
				return fmt.Errorf("NewChecked() = %v, %v; want nil, ErrNotAvailable", ipvs, err)
			}
			ipvs := New()
			if ipvs == nil {
				return errors.New("New() returned nil; want an Interface that reports the error")
			}
			if _, err := ipvs.GetVirtualServers(); !errors.Is(err, ErrNotAvailable) {
				return fmt.Errorf("GetVirtualServers() error = %v, want ErrNotAvailable", err)
			}
			if err := ipvs.Flush(); !errors.Is(err, ErrNotAvailable) {
				return fmt.Errorf("Flush() error = %v, want ErrNotAvailable", err)
			}
			return nil
		}
		t.Log("IPVS available: round-tripping in a private namespace")
		return roundTrip()
	})
	if err != nil {
		t.Fatal(err)
	}
}

func roundTrip() error {
	ipvs, err := NewChecked()
	if err != nil {
		return err
	}
	if existing, err := ipvs.GetVirtualServers(); err != nil || len(existing) != 0 {
		return fmt.Errorf("fresh namespace has virtual servers %v (%v): not isolated", existing, err)
	}
	vs := &VirtualServer{Address: net.ParseIP("198.18.10.1"), Protocol: "TCP", Port: 80, Scheduler: "rr"}
	if err := ipvs.AddVirtualServer(vs); err != nil {
		return err
	}
	if err := ipvs.AddVirtualServer(vs); err == nil {
		return errors.New("adding a duplicate virtual server succeeded")
	}
	got, err := ipvs.GetVirtualServer(vs)
	if err != nil {
		return err
	}
	if !got.Equal(vs) {
		return fmt.Errorf("GetVirtualServer = %+v, want %+v", got, vs)
	}
	vs.Flags, vs.Timeout = FlagPersistent, 600
	if err := ipvs.UpdateVirtualServer(vs); err != nil {
		return err
	}
	if got, err = ipvs.GetVirtualServer(vs); err != nil || !got.Equal(vs) {
		return fmt.Errorf("after update GetVirtualServer = %+v, %v; want %+v", got, err, vs)
	}
	rs := &RealServer{Address: net.ParseIP("198.18.1.5"), Port: 8080, Weight: 1}
	if err := ipvs.AddRealServer(vs, rs); err != nil {
		return err
	}
	rs.Weight = 0
	if err := ipvs.UpdateRealServer(vs, rs); err != nil {
		return err
	}
	rss, err := ipvs.GetRealServers(vs)
	if err != nil || len(rss) != 1 || !rss[0].Equal(rs) || rss[0].Weight != 0 {
		return fmt.Errorf("GetRealServers = %v, %v; want [%v weight 0]", rss, err, rs)
	}
	if err := ipvs.DeleteRealServer(vs, rs); err != nil {
		return err
	}
	if err := ipvs.ConfigureTimeouts(900*time.Second, 120*time.Second, 300*time.Second); err != nil {
		return err
	}
	vs6 := &VirtualServer{Address: net.ParseIP("fd00:18:10::1"), Protocol: "UDP", Port: 53, Scheduler: "rr"}
	if err := ipvs.AddVirtualServer(vs6); err != nil {
		return err
	}
	if all, err := ipvs.GetVirtualServers(); err != nil || len(all) != 2 {
		return fmt.Errorf("GetVirtualServers = %v, %v; want 2", all, err)
	}
	if err := ipvs.DeleteVirtualServer(vs6); err != nil {
		return err
	}
	if err := ipvs.Flush(); err != nil {
		return err
	}
	if all, err := ipvs.GetVirtualServers(); err != nil || len(all) != 0 {
		return fmt.Errorf("after Flush GetVirtualServers = %v, %v", all, err)
	}
	return nil
}
