//go:build !linux

package iptables

import "errors"

// NFTablesGeneration fails: nf_tables is Linux's.
func NFTablesGeneration() (uint32, error) {
	return 0, errors.New("nf_tables generation: not on Linux")
}
