package proxy

import (
	"net"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
)

// ep builds a BaseEndpointInfo from a compact spec. flags: R ready, S
// serving, T terminating, L local. hints: "zone-a,zone-b" / "node-1".
func ep(addr, flags, zoneHints, nodeHints string) *BaseEndpointInfo {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		panic(err)
	}
	port, _ := strconv.Atoi(portStr)
	var zones, nodes sets.Set[string]
	if zoneHints != "" {
		zones = sets.New(strings.Split(zoneHints, ",")...)
	}
	if nodeHints != "" {
		nodes = sets.New(strings.Split(nodeHints, ",")...)
	}
	return newBaseEndpointInfo(host, port,
		strings.Contains(flags, "L"), strings.Contains(flags, "R"),
		strings.Contains(flags, "S"), strings.Contains(flags, "T"),
		zones, nodes)
}

func endpointStrings(eps []Endpoint) []string {
	if eps == nil {
		return nil
	}
	out := make([]string, 0, len(eps))
	for _, e := range eps {
		out = append(out, e.String())
	}
	return out
}
