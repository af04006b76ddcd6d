//go:build !linux

package app

import (
	"context"
	"errors"
)

func (s *ProxyServer) startSocketLB(_ context.Context, o socketLBOptions) error {
	if !o.enabled {
		return nil
	}
	return errors.New("--socket-lb: socket load balancing needs Linux cgroup BPF programs")
}
