//go:build linux

package app

import (
	"context"
	"fmt"
	"os"
	"runtime"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	utiliptables "k8s.io/net-utils/iptables"
)

// netnsPath is where a --netns name lives: a bare name is one `ip netns`
// made, anything with a slash a path such as /proc/PID/ns/net.
func netnsPath(netns string) string {
	for _, c := range netns {
		if c == '/' {
			return netns
		}
	}
	return "/run/netns/" + netns
}

// runInNetns runs fn on an OS thread that entered the network namespace
// netns (none: fn runs here). What fn does on that thread happens in netns,
// and so do the processes it starts (a child is forked from the calling
// thread), which is how a computation that runs commands, or a whole
// kube-proxy, sees what it would see had it been started inside netns.
// Goroutines fn starts run elsewhere, in this process's namespace: fn must
// not rely on them. The thread is never handed back to the Go scheduler; it
// ends with fn's goroutine, so no other code ever runs in netns by accident.
func runInNetns(netns string, fn func() error) error {
	if netns == "" {
		return fn()
	}
	f, err := os.Open(netnsPath(netns))
	if err != nil {
		return fmt.Errorf("network namespace %q: %w", netns, err)
	}
	defer f.Close()
	done := make(chan error, 1)
	go func() {
		// No UnlockOSThread: the thread exits with this goroutine.
		runtime.LockOSThread()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("entering network namespace %q: %w", netns, err)
			return
		}
		done <- fn()
	}()
	return <-done
}

// traceIPTablesBackend picks the iptables backend whose rules trace reads,
// the way kube-proxy in netns picks the one it programs (--iptables-backend,
// auto by default: kubelet's chains, else whichever backend holds more
// rules), with detection run inside netns: the host's backend says nothing
// about a namespace's.
func traceIPTablesBackend(ctx context.Context, fs *pflag.FlagSet, netns string) (utiliptables.BackendChoice, error) {
	mode := utiliptables.BackendModeAuto
	if fs != nil {
		if fl := fs.Lookup(iptablesBackendFlagName); fl != nil {
			if f, ok := fl.Value.(*iptablesBackendFlag); ok {
				mode = f.mode
			}
		}
	}
	if mode != utiliptables.BackendModeAuto {
		// Detection would only warn that the rules are elsewhere, and it
		// reads every ruleset of both backends: trace reads what it is told.
		return utiliptables.BackendChoice{Mode: mode, Backend: utiliptables.Backend(mode), Reason: "--" + iptablesBackendFlagName + "=" + string(mode)}, nil
	}
	var choice utiliptables.BackendChoice
	err := runInNetns(netns, func() error {
		var err error
		choice, err = utiliptables.ChooseBackend(ctx, mode)
		return err
	})
	if err != nil {
		return choice, fmt.Errorf("choosing the iptables backend to read (--%s=%s): %w", iptablesBackendFlagName, mode.String(), err)
	}
	return choice, nil
}
