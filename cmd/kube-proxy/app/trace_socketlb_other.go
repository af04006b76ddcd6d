//go:build !linux

package app

import "k8s.io/kube-proxy/pkg/proxy/trace"

// readSocketLB: there is no socket load balancer outside Linux.
func readSocketLB(trace.Packet, string, bool) (*trace.SocketLB, error) { return nil, nil }
