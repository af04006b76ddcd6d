package app

import (
	"fmt"
	"net"
	"strconv"

	netutils "k8s.io/utils/net"
)

// ipVar is a pflag.Value holding an IP address as a string; its type name "ip"
// matches upstream's, so --help and flag introspection read the same.
type ipVar struct {
	val *string
}

func (v ipVar) Set(s string) error {
	if s == "" {
		*v.val = ""
		return nil
	}
	if netutils.ParseIPSloppy(s) == nil {
		return fmt.Errorf("%q is not a valid IP address", s)
	}
	*v.val = s
	return nil
}

func (v ipVar) String() string {
	if v.val == nil {
		return ""
	}
	return *v.val
}

func (v ipVar) Type() string { return "ip" }

// ipPortVar is a pflag.Value holding "IP" or "IP:port"; type name "ipport" as upstream.
type ipPortVar struct {
	val *string
}

func (v ipPortVar) Set(s string) error {
	if s == "" {
		*v.val = ""
		return nil
	}
	if netutils.ParseIPSloppy(s) != nil {
		*v.val = s
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not a valid IP or IP:port: %w", s, err)
	}
	if netutils.ParseIPSloppy(host) == nil {
		return fmt.Errorf("%q: %q is not a valid IP address", s, host)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: %q is not a valid port number", s, port)
	}
	*v.val = s
	return nil
}

func (v ipPortVar) String() string {
	if v.val == nil {
		return ""
	}
	return *v.val
}

func (v ipPortVar) Type() string { return "ipport" }
