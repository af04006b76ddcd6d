//go:build !linux

package nfacct

// New reports ErrNotSupported: nfacct exists only on Linux.
func New() (Interface, error) {
	return nil, ErrNotSupported
}
