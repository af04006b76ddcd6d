package app

import (
	"strings"
	"testing"
)

func TestSocketLBFlagsValidate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // substring of the error; "" for none
	}{
		{[]string{"--proxy-mode=nftables", "--socket-lb"}, ""},
		{[]string{"--proxy-mode=iptables", "--socket-lb", "--socket-lb-cgroup-path=/sys/fs/cgroup/unified/pods"}, ""},
		{[]string{"--proxy-mode=ipvs", "--socket-lb"}, `--socket-lb requires --proxy-mode nftables or iptables, not "ipvs"`},
		{[]string{"--proxy-mode=nftables", "--socket-lb-cgroup-path=/x"}, `--socket-lb-cgroup-path "/x" requires --socket-lb`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseAndComplete(t, tc.args)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
