//go:build !linux

package app

import (
	"fmt"

	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// readIPVSTable: IPVS is a Linux kernel facility.
func readIPVSTable(string) ([]trace.VirtualServer, error) {
	return nil, fmt.Errorf("IPVS is a Linux kernel feature; this platform has no IPVS table to trace")
}
