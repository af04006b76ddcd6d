package app

import (
	"errors"
	"fmt"
	"math"
	"net"
	"regexp"
	"strconv"
	"time"

	"github.com/spf13/pflag"

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

// durationVar is a pflag.Value holding a time.Duration, type name "duration" like
// pflag's own. It exists for its errors: pflag reports every unparsable duration
// as "must be a duration like ...", which is misleading for a well-formed value
// that is merely too large for time.Duration.
type durationVar struct {
	val *time.Duration
}

// durationSyntax is time.ParseDuration's grammar, so that a value it rejects can
// be told apart as malformed or as out of range.
var durationSyntax = regexp.MustCompile(`^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|\x{00b5}s|\x{03bc}s|ms|s|m|h))+$`)

func (v durationVar) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err == nil {
		*v.val = d
		return nil
	}
	if durationSyntax.MatchString(s) {
		return fmt.Errorf("%q is out of range: a duration must lie within \u00b1%s (about 292 years)", s, time.Duration(math.MaxInt64))
	}
	return errors.New(`must be a duration like "30s" or "5m"`)
}

func (v durationVar) String() string {
	if v.val == nil {
		return "0s"
	}
	return v.val.String()
}

func (v durationVar) Type() string { return "duration" }

// durationFlag registers a duration flag like fs.DurationVar, with durationVar's
// errors.
func durationFlag(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationVar{p}, name, usage)
}
