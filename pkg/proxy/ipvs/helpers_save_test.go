//go:build linux

package ipvs

import (
	"bytes"

	utiliptables "k8s.io/net-utils/iptables"
)

type bytesBuffer struct{ bytes.Buffer }

func tableName(s string) utiliptables.Table { return utiliptables.Table(s) }
