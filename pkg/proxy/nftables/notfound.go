//go:build linux

package nftables

import (
	"errors"
	"strings"
	"syscall"

	"sigs.k8s.io/knftables"
)

// isNotFound reports whether err says the table or object does not exist.
// knftables classifies errors from the nft binary, but its netlink List path
// (used with the NFTablesNetlink gate) returns google/nftables errors, which
// flatten the errno into text ("receiveAckAware: netlink receive: no such
// file or directory"), so the errno can only be recognised by its message.
func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	if knftables.IsNotFound(err) || errors.Is(err, syscall.ENOENT) {
		return true
	}
	return strings.HasSuffix(err.Error(), syscall.ENOENT.Error())
}
