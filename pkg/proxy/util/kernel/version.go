package kernel

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

const (
	// NFTablesKubeProxyKernelVersion is the oldest kernel the nftables
	// proxier supports (it needs features that landed in 5.13).
	NFTablesKubeProxyKernelVersion = "5.13"
	// IPVSConnReuseModeMinSupportedKernelVersion is the first kernel with the
	// net/ipv4/vs/conn_reuse_mode sysctl.
	IPVSConnReuseModeMinSupportedKernelVersion = "4.1"
	// IPVSConnReuseModeFixedKernelVersion is the first kernel where
	// conn_reuse_mode=1 no longer adds a one-second delay on port reuse.
	IPVSConnReuseModeFixedKernelVersion = "5.9"
)

const osReleasePath = "/proc/sys/kernel/osrelease"

// GetVersion returns the version of the running kernel, read from
// /proc/sys/kernel/osrelease.
func GetVersion() (*version.Version, error) {
	return getVersion(os.ReadFile)
}

func getVersion(readFile func(string) ([]byte, error)) (*version.Version, error) {
	b, err := readFile(osReleasePath)
	if err != nil {
		return nil, fmt.Errorf("reading kernel version from %s: %w", osReleasePath, err)
	}
	v, err := parseRelease(string(b))
	if err != nil {
		return nil, fmt.Errorf("parsing kernel version from %s: %w", osReleasePath, err)
	}
	return v, nil
}

// parseRelease extracts "major.minor[.patch]" from a kernel release string
// such as "6.8.0-45-generic", "5.15.167.4-microsoft-standard-WSL2" or
// "4.19.0+". Distribution suffixes are ignored; they are not semver
// pre-releases and must not make the version compare lower.
func parseRelease(s string) (*version.Version, error) {
	s = strings.TrimSpace(strings.TrimRight(s, "\x00"))
	// Keep the leading run of digits and dots, and at most three components.
	end, dots := 0, 0
	for end < len(s) {
		c := s[end]
		if c == '.' {
			if dots == 2 || end+1 >= len(s) || s[end+1] < '0' || s[end+1] > '9' {
				break
			}
			dots++
		} else if c < '0' || c > '9' {
			break
		}
		end++
	}
	prefix := s[:end]
	if dots == 0 {
		return nil, fmt.Errorf("%q has no major.minor version", s)
	}
	v, err := version.ParseGeneric(prefix)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	return v, nil
}
