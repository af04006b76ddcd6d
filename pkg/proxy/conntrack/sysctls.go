//go:build linux

package conntrack

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"

	"k8s.io/net-utils/sysctl"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// DefaultHashsizePath is where the nf_conntrack module exposes its hash
// table size. It is a module parameter, not a sysctl, so it lives in /sys.
const DefaultHashsizePath = "/sys/module/nf_conntrack/parameters/hashsize"

// maxConntrackMax caps nf_conntrack_max on very large machines, where
// maxPerCore × cores would reserve far more kernel memory than any node needs.
const maxConntrackMax = 1048576

// Sysctl names kube-proxy sets (slash notation, relative to /proc/sys).
const (
	sysctlMax                   = "net/netfilter/nf_conntrack_max"
	sysctlTCPEstablishedTimeout = "net/netfilter/nf_conntrack_tcp_timeout_established"
	sysctlTCPCloseWaitTimeout   = "net/netfilter/nf_conntrack_tcp_timeout_close_wait"
	sysctlTCPBeLiberal          = "net/netfilter/nf_conntrack_tcp_be_liberal"
	sysctlUDPTimeout            = "net/netfilter/nf_conntrack_udp_timeout"
	sysctlUDPStreamTimeout      = "net/netfilter/nf_conntrack_udp_timeout_stream"
)

// SetSysctls applies config to the kernel of the current network namespace
// and host: nf_conntrack_max and the hash size, the TCP and UDP timeouts and
// tcp_be_liberal. Unset or zero values leave the kernel's value alone.
func SetSysctls(ctx context.Context, config *kubeproxyconfig.KubeProxyConntrackConfiguration) error {
	return Sysctls{Sysctl: sysctl.New()}.Apply(ctx, config)
}

// Sysctls applies conntrack settings through injectable dependencies; the
// zero values of the optional fields select the real host.
type Sysctls struct {
	// Sysctl reads and writes /proc/sys. Required.
	Sysctl sysctl.Interface
	// HashsizePath overrides DefaultHashsizePath.
	HashsizePath string
	// NumCPU overrides the online CPU count used to scale MaxPerCore.
	NumCPU func() int
}

// Apply applies config. It stops at the first failure, returning an error
// that names the setting and value.
func (s Sysctls) Apply(ctx context.Context, config *kubeproxyconfig.KubeProxyConntrackConfiguration) error {
	if config == nil {
		return nil
	}
	logger := klog.FromContext(ctx)

	numCPU := s.NumCPU
	if numCPU == nil {
		numCPU = onlineCPUs
	}
	if max := conntrackMax(logger, config, numCPU()); max > 0 {
		// Only ever raise the limit: an administrator may have set it
		// higher, and lowering it could drop established flows.
		if cur, err := s.Sysctl.GetSysctl(sysctlMax); err != nil || cur < max {
			if err := s.set(logger, sysctlMax, max); err != nil {
				return err
			}
		}
		// The kernel's default hash size assumes the default max; keep
		// about four entries per bucket for the new max.
		hashsize, err := s.hashsize()
		if err != nil {
			return err
		}
		if hashsize < max/4 {
			if err := s.setHashsize(logger, max/4); err != nil {
				return err
			}
		}
	}

	if d := config.TCPEstablishedTimeout; d != nil && d.Duration > 0 {
		if err := s.set(logger, sysctlTCPEstablishedTimeout, seconds(d.Duration)); err != nil {
			return err
		}
	}
	if d := config.TCPCloseWaitTimeout; d != nil && d.Duration > 0 {
		if err := s.set(logger, sysctlTCPCloseWaitTimeout, seconds(d.Duration)); err != nil {
			return err
		}
	}
	if config.TCPBeLiberal {
		if err := s.set(logger, sysctlTCPBeLiberal, 1); err != nil {
			return err
		}
	}
	if d := config.UDPTimeout.Duration; d > 0 {
		if err := s.set(logger, sysctlUDPTimeout, seconds(d)); err != nil {
			return err
		}
	}
	if d := config.UDPStreamTimeout.Duration; d > 0 {
		if err := s.set(logger, sysctlUDPStreamTimeout, seconds(d)); err != nil {
			return err
		}
	}
	return nil
}

func seconds(d time.Duration) int { return int(d / time.Second) }

// conntrackMax returns the nf_conntrack_max to ensure: MaxPerCore × cores,
// at least Min, at most maxConntrackMax; 0 when MaxPerCore is unset or 0,
// meaning "leave it alone".
func conntrackMax(logger klog.Logger, config *kubeproxyconfig.KubeProxyConntrackConfiguration, numCPU int) int {
	if config.MaxPerCore == nil || *config.MaxPerCore <= 0 {
		return 0
	}
	floor := 0
	if config.Min != nil {
		floor = int(*config.Min)
	}
	scaled := int(*config.MaxPerCore) * numCPU
	switch {
	case scaled > maxConntrackMax:
		logger.V(3).Info("Capping scaled conntrack-max-per-core", "scaled", scaled, "limit", maxConntrackMax)
		return maxConntrackMax
	case scaled > floor:
		logger.V(3).Info("Using scaled conntrack-max-per-core", "scaled", scaled)
		return scaled
	default:
		logger.V(3).Info("Using conntrack-min", "min", floor)
		return floor
	}
}

func onlineCPUs() int {
	if n, err := cpuset.NumCPU(); err == nil && n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// set writes name unless it already holds value, to avoid needless writes
// (which fail on read-only /proc/sys even when nothing would change).
func (s Sysctls) set(logger klog.Logger, name string, value int) error {
	if cur, err := s.Sysctl.GetSysctl(name); err == nil && cur == value {
		return nil
	}
	logger.Info("Set sysctl", "entry", name, "value", value)
	if err := s.Sysctl.SetSysctl(name, value); err != nil {
		return fmt.Errorf("setting sysctl %s to %d: %w", name, value, err)
	}
	return nil
}

func (s Sysctls) hashsizePath() string {
	if s.HashsizePath != "" {
		return s.HashsizePath
	}
	return DefaultHashsizePath
}

func (s Sysctls) hashsize() (int, error) {
	path := s.hashsizePath()
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading conntrack hashsize: %w", err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parsing conntrack hashsize from %s: %w", path, err)
	}
	return v, nil
}

func (s Sysctls) setHashsize(logger klog.Logger, value int) error {
	path := s.hashsizePath()
	logger.Info("Setting conntrack hashsize", "conntrackHashsize", value)
	if err := os.WriteFile(path, []byte(strconv.Itoa(value)), 0o640); err != nil {
		return fmt.Errorf("setting conntrack hashsize to %d in %s: %w", value, path, err)
	}
	return nil
}
