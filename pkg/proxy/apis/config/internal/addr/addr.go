package addr

import (
	"net"
	"strconv"

	netutils "k8s.io/utils/net"
)

// WithPort returns addr unchanged if it already is "host:port" or is not an IP at
// all (validation reports that later, naming the field); a bare IP gets port
// appended, bracketed if IPv6.
func WithPort(addr string, port int) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if netutils.ParseIPSloppy(addr) == nil {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(port))
}

// ServerHosts returns the default hosts of the healthz server (all addresses) and
// of the metrics server (loopback) for a node whose primary IP is nodeIP: IPv4
// when nodeIP is empty or an IPv4 address, IPv6 otherwise. Unparsable input gets
// IPv6 because upstream's v1alpha1 defaulting does so, and validation rejects it
// anyway.
func ServerHosts(nodeIP string) (healthz, metrics string) {
	if nodeIP == "" || netutils.ParseIPSloppy(nodeIP).To4() != nil {
		return "0.0.0.0", "127.0.0.1"
	}
	return "::", "::1"
}

// ServerAddress defaults a server's "host:port": empty becomes host:port, a bare
// IP gets port appended, anything else is left for validation to judge.
func ServerAddress(cur, host string, port int) string {
	if cur == "" {
		return net.JoinHostPort(host, strconv.Itoa(port))
	}
	return WithPort(cur, port)
}
