//go:build !windows

package app

// upstreamOSFlags are the flags upstream kube-proxy has only on this platform: none
// outside Windows (iptables-backend is this build's addition, not upstream's).
var upstreamOSFlags = map[string]upstreamFlag{}
