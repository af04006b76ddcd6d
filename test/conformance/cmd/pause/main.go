// Command pause is the pod sandbox's process for the conformance cluster (the image the
// kubelet names registry.k8s.io/pause:<version>): it holds the pod's namespaces open, reaps
// the zombies it inherits as PID 1, and exits on SIGINT or SIGTERM. It is written here
// because no registry is reachable.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every exited child: orphans of the pod re-parent to PID 1.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
