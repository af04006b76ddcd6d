//go:build linux

package app

import (
	"context"
	"fmt"
	"sync"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"

	utiliptables "k8s.io/net-utils/iptables"
)

// iptablesBackendFlagName is this build's addition that replaces the
// iptables-wrapper script upstream's image runs in front of every iptables call.
const iptablesBackendFlagName = "iptables-backend"

// iptablesBackendFlag is --iptables-backend: the mode asked for and, once resolved,
// the choice. Keeping the choice with the flag makes detection (which reads both
// backends' whole rulesets) run, and be logged, once per process, however many
// places create iptables interfaces.
type iptablesBackendFlag struct {
	mode   utiliptables.BackendMode
	once   sync.Once
	choice utiliptables.BackendChoice
	err    error
}

func (f *iptablesBackendFlag) String() string     { return f.mode.String() }
func (f *iptablesBackendFlag) Set(s string) error { return f.mode.Set(s) }
func (f *iptablesBackendFlag) Type() string       { return f.mode.Type() }

func addIPTablesBackendFlag(fs *pflag.FlagSet) {
	fs.Var(&iptablesBackendFlag{mode: utiliptables.BackendModeAuto}, iptablesBackendFlagName,
		"Which iptables binaries the iptables proxy mode runs: 'legacy' (iptables-legacy), 'nft' (iptables-nft), or 'auto' to use the backend "+
			"the host's rules are in (kubelet's KUBE-IPTABLES-HINT or KUBE-KUBELET-CANARY chain, else whichever holds more rules), "+
			"as upstream's image does with its iptables-wrapper script; with neither installed, 'iptables' from PATH. The choice and why are logged at startup.")
}

// iptablesBackend resolves --iptables-backend (auto without a flag set), once.
func (s *ProxyServer) iptablesBackend(ctx context.Context) (utiliptables.Backend, error) {
	var f *iptablesBackendFlag
	if s.flags != nil {
		if fl := s.flags.Lookup(iptablesBackendFlagName); fl != nil {
			f, _ = fl.Value.(*iptablesBackendFlag)
		}
	}
	if f == nil {
		f = &iptablesBackendFlag{mode: utiliptables.BackendModeAuto}
	}
	f.once.Do(func() { f.choice, f.err = utiliptables.ChooseBackend(ctx, f.mode) })
	if f.err != nil {
		return "", fmt.Errorf("--%s=%s: %w", iptablesBackendFlagName, f.mode.String(), f.err)
	}
	return f.choice.Backend, nil
}

// iptablesFor returns family's iptables over the backend --iptables-backend
// chose: what the iptables and the ipvs mode program their chains with.
func (s *ProxyServer) iptablesFor(ctx context.Context, family v1.IPFamily) (utiliptables.Interface, error) {
	backend, err := s.iptablesBackend(ctx)
	if err != nil {
		return nil, err
	}
	return utiliptables.NewWithBackend(iptablesProtocol(family), backend), nil
}
