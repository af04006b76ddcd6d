//go:build unix

package iptables

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lockPollInterval is how often grabLock retries a held lock.
const lockPollInterval = 100 * time.Millisecond

// grabLock takes the xtables lock file the way iptables >= 1.6 does (an exclusive
// flock on the file), waiting up to timeout. The returned func releases it.
func grabLock(path string, timeout time.Duration) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening xtables lock %s: %w", path, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("locking xtables lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("timed out after %v waiting for xtables lock %s", timeout, path)
		}
		time.Sleep(lockPollInterval)
	}
}
