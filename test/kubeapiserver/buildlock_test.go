//go:build linux

package kubeapiserver

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestWaitUnlocked(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lockFor < 0: no lock file; 0: file present, unlocked; else locked that long.
		lockFor time.Duration
		wait    time.Duration
		want    bool
	}{
		{name: "no lock file", lockFor: -1, wait: time.Second, want: false},
		{name: "no build running", lockFor: 0, wait: time.Second, want: false},
		{name: "build ends in time", lockFor: 300 * time.Millisecond, wait: 10 * time.Second, want: true},
		{name: "build outlasts the wait", lockFor: time.Hour, wait: 300 * time.Millisecond, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), buildLockName)
			if tc.lockFor >= 0 {
				// Like flock(1) in hack/build-fixtures.sh: an exclusive lock on its own
				// open file, which a second open of the same file cannot share.
				holder, err := os.Create(path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { holder.Close() })
				if tc.lockFor > 0 {
					fd := int(holder.Fd())
					if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
						t.Fatal(err)
					}
					done := make(chan struct{})
					timer := time.AfterFunc(tc.lockFor, func() { _ = syscall.Flock(fd, syscall.LOCK_UN); close(done) })
					// The file is closed only once the timer has let go of its descriptor.
					t.Cleanup(func() {
						if timer.Stop() {
							close(done)
						}
						<-done
					})
				}
			}
			began := time.Now()
			if got := waitUnlocked(t, path, time.Now().Add(tc.wait), 20*time.Millisecond); got != tc.want {
				t.Errorf("waitUnlocked = %v, want %v", got, tc.want)
			}
			if tc.lockFor == 0 && time.Since(began) > time.Second {
				t.Errorf("waited %s with no build running", time.Since(began))
			}
		})
	}
}
