//go:build linux

package ipvs

import (
	"bytes"
	"strconv"

	utiliptables "k8s.io/net-utils/iptables"
)

type bytesBuffer struct{ bytes.Buffer }

func tableName(s string) utiliptables.Table { return utiliptables.Table(s) }

func itoa(i int) string { return strconv.Itoa(i) }
