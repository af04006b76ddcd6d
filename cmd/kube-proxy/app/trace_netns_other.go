//go:build !linux

package app

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	utiliptables "k8s.io/net-utils/iptables"
)

func netnsPath(netns string) string { return netns }

// runInNetns: network namespaces are a Linux facility.
func runInNetns(netns string, fn func() error) error {
	if netns == "" {
		return fn()
	}
	return fmt.Errorf("network namespace %q: network namespaces are a Linux feature", netns)
}

// traceIPTablesBackend: without --iptables-backend (a Linux flag) there is
// only what PATH calls iptables.
func traceIPTablesBackend(context.Context, *pflag.FlagSet, string) (utiliptables.BackendChoice, error) {
	return utiliptables.BackendChoice{Backend: utiliptables.BackendPath, Reason: "this platform has one iptables"}, nil
}
