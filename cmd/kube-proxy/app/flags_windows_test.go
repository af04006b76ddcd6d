//go:build windows

package app

// upstreamOSFlags are the flags upstream kube-proxy has only on this platform.
var upstreamOSFlags = upstreamWindowsFlags
