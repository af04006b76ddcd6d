//go:build !unix

package iptables

import (
	"fmt"
	"time"
)

// grabLock cannot lock where there is no flock; iptables only exists on Linux anyway.
func grabLock(path string, _ time.Duration) (func(), error) {
	return nil, fmt.Errorf("xtables lock %s: file locking is not supported on this platform", path)
}
