package nfacct

import (
	"errors"
	"fmt"
)

// MaxLength is the longest counter name the kernel accepts
// (NFACCT_NAME_MAX - 1, leaving room for the terminating NUL).
const MaxLength = 31

// Counter is one accounting object.
type Counter struct {
	Name    string
	Packets uint64
	Bytes   uint64
}

// Interface manages accounting objects in the current network namespace.
type Interface interface {
	// Ensure creates the counter name unless it already exists.
	Ensure(name string) error
	// Add creates the counter name; ErrObjectAlreadyExists if it exists.
	Add(name string) error
	// Get returns the counter name; ErrObjectNotFound if it does not exist.
	Get(name string) (*Counter, error)
	// List returns every counter. If the kernel kept interrupting the dump
	// the counters read so far are returned together with an error that
	// matches unix.EINTR.
	List() ([]*Counter, error)
}

var (
	// ErrObjectNotFound is returned for a counter that does not exist.
	ErrObjectNotFound = errors.New("object not found")
	// ErrObjectAlreadyExists is returned by Add for an existing counter.
	ErrObjectAlreadyExists = errors.New("object already exists")
	// ErrNameExceedsMaxLength is returned for names longer than MaxLength.
	ErrNameExceedsMaxLength = fmt.Errorf("object name exceeds the maximum allowed length of %d characters", MaxLength)
	// ErrEmptyName is returned by Add for an empty name.
	ErrEmptyName = errors.New("object name cannot be empty")
	// ErrUnexpected wraps any other failure.
	ErrUnexpected = errors.New("unexpected error")
	// ErrNotSupported is returned by New when the kernel lacks nfnetlink_acct.
	ErrNotSupported = errors.New("nfacct sub-system not available")
)

func validateName(name string, allowEmpty bool) error {
	if name == "" && !allowEmpty {
		return ErrEmptyName
	}
	if len(name) > MaxLength {
		return fmt.Errorf("nfacct counter %q: %w", name, ErrNameExceedsMaxLength)
	}
	return nil
}
