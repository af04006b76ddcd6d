//go:build windows

package app

// winkernelEntryPoints returns pkg/proxy/winkernel's entry points; nil until that
// package exists, which makes the kernelspace mode fail with errNoWinkernel.
func winkernelEntryPoints() *winkernelBackend { return nil }
