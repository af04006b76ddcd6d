//go:build linux

package ipvs

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/sets"
)

// TestNetlinkHandleKernel runs the real handle in a private network
// namespace: address listings by family, and the dummy interface where the
// kernel has dummy links.
func TestNetlinkHandleKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	errc := make(chan error, 1)
	go func() {
		// The thread stays in the namespace; the runtime discards it when
		// this goroutine ends, since it is never unlocked.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- netlinkScenario(t)
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func netlinkScenario(t *testing.T) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return err
	}
	for _, a := range []string{"198.18.0.10/32", "fd00:18::10/128"} {
		addr, _ := netlink.ParseAddr(a)
		addr.Flags = unix.IFA_F_NODAD
		if err := netlink.AddrAdd(lo, addr); err != nil {
			return err
		}
	}
	v4, v6 := NewNetLinkHandle(false), NewNetLinkHandle(true)
	got4, err := v4.GetAllLocalAddressesExcept(defaultDummyDevice)
	if err != nil {
		return err
	}
	got6, err := v6.GetAllLocalAddresses()
	if err != nil {
		return err
	}
	if !got4.Equal(sets.New("198.18.0.10")) || !got6.Equal(sets.New("fd00:18::10")) {
		t.Errorf("addresses: IPv4 %v, IPv6 %v; want 198.18.0.10 and fd00:18::10 (no loopback)", sets.List(got4), sets.List(got6))
	}

	if _, err := v4.EnsureDummyDevice(defaultDummyDevice); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
			t.Logf("skipping the dummy interface part: this kernel cannot create dummy links: %v", err)
			return nil
		}
		return err
	}
	if exist, err := v4.EnsureAddressBind("172.30.0.1", defaultDummyDevice); exist || err != nil {
		t.Errorf("bind: %v, %v", exist, err)
	}
	if exist, _ := v4.EnsureAddressBind("172.30.0.1", defaultDummyDevice); !exist {
		t.Error("second bind did not report the address bound")
	}
	if got, _ := v4.GetAllLocalAddressesExcept(defaultDummyDevice); !got.Equal(sets.New("198.18.0.10")) {
		t.Errorf("addresses except %s: %v", defaultDummyDevice, sets.List(got))
	}
	if err := v4.UnbindAddress("172.30.0.1", defaultDummyDevice); err != nil {
		t.Error(err)
	}
	if err := v4.DeleteDummyDevice(defaultDummyDevice); err != nil {
		t.Error(err)
	}
	if err := v4.DeleteDummyDevice(defaultDummyDevice); err != nil {
		t.Errorf("deleting a missing dummy interface: %v", err)
	}
	return nil
}
