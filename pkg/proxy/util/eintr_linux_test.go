package util

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

func TestShouldRetryOnEINTR(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{unix.EINTR, true},
		{fmt.Errorf("dump: %w", unix.EINTR), true},
		{unix.EAGAIN, false},
	}
	for _, tc := range tests {
		if got := ShouldRetryOnEINTR(tc.err); got != tc.want {
			t.Errorf("ShouldRetryOnEINTR(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if MaxAttemptsEINTR.Steps != 5 {
		t.Errorf("MaxAttemptsEINTR.Steps = %d, want 5", MaxAttemptsEINTR.Steps)
	}
}
