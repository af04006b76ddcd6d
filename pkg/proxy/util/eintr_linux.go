package util

import (
	"errors"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
)

// MaxAttemptsEINTR bounds retries of netlink dumps that the kernel
// interrupted (EINTR) because the table changed during the dump.
var MaxAttemptsEINTR = wait.Backoff{Steps: 5}

// ShouldRetryOnEINTR is a retry predicate for use with MaxAttemptsEINTR.
var ShouldRetryOnEINTR = func(err error) bool { return errors.Is(err, unix.EINTR) }
