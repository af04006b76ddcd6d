//go:build linux

package app

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
	utilipvs "k8s.io/net-utils/ipvs"

	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// readIPVSTable lists the IPVS table of netns (none: this one) through
// net-utils' ipvs Interface. Its netlink sockets belong to the namespace
// of the thread that opens them, so another namespace is read from a
// locked thread that enters it and is then thrown away (never returned to
// the Go scheduler in the wrong namespace).
func readIPVSTable(netns string) ([]trace.VirtualServer, error) {
	if netns == "" {
		return listIPVSTable()
	}
	path := netns
	if !strings.Contains(netns, "/") {
		path = "/run/netns/" + netns
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("network namespace %q: %w", netns, err)
	}
	defer f.Close()
	type answer struct {
		vss []trace.VirtualServer
		err error
	}
	done := make(chan answer, 1)
	go func() {
		// No UnlockOSThread: the thread exits with this goroutine.
		runtime.LockOSThread()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- answer{err: fmt.Errorf("entering network namespace %q: %w", netns, err)}
			return
		}
		vss, err := listIPVSTable()
		done <- answer{vss, err}
	}()
	a := <-done
	return a.vss, a.err
}

func listIPVSTable() ([]trace.VirtualServer, error) {
	h, err := utilipvs.NewChecked()
	if err != nil {
		return nil, fmt.Errorf("the kernel lacks IPVS support (the ip_vs module), so there is no IPVS table to trace: %w", err)
	}
	return ipvsTable(h)
}
