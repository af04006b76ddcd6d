//go:build linux

package ipvs

import (
	"bytes"
	"regexp"
	"strconv"

	utiliptables "k8s.io/net-utils/iptables"
)

type bytesBuffer struct{ bytes.Buffer }

func tableName(s string) utiliptables.Table { return utiliptables.Table(s) }

func itoa(i int) string { return strconv.Itoa(i) }

var (
	counterRE     = regexp.MustCompile(`\[\d+:\d+\]`)
	saveCommentRE = regexp.MustCompile(`(?m)^#.*\n`)
)

// normalizeSave drops what changes between two saves of the same rules.
func normalizeSave(s string) string {
	return saveCommentRE.ReplaceAllString(counterRE.ReplaceAllString(s, "[0:0]"), "")
}
