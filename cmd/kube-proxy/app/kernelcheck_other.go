//go:build !linux

package app

// newHostKernel: only Linux modes have kernel requirements.
func newHostKernel() kernelInfo { return nil }
