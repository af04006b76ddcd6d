package app

import (
	"context"
	goflag "flag"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"k8s.io/apimachinery/pkg/util/validation/field"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json and its flags, as upstream
	_ "k8s.io/component-base/version/verflag"    // --version, parsed by printVersionAndExitIfRequested

	"k8s.io/kube-proxy/pkg/features"
)

// NewProxyCommand creates the kube-proxy command with its flags bound to fresh Options.
func NewProxyCommand() *cobra.Command {
	opts := NewOptions()

	cmd := &cobra.Command{
		Use: kubeProxy,
		Long: `The Kubernetes network proxy runs on each node. This
reflects services as defined in the Kubernetes API on each node and can do simple
TCP, UDP, and SCTP stream forwarding or round robin TCP, UDP, and SCTP forwarding across a set of backends.
Service cluster IPs and ports are currently found through Docker-links-compatible
environment variables specifying ports opened by the service proxy. There is an optional
addon that provides cluster DNS for these cluster IPs. The user must create a service
with the apiserver API to configure the proxy.

This build can also run without a cluster: --manifests reads Services, EndpointSlices
and Nodes from YAML/JSON files, and --dry-run prints the rules instead of programming them.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if printVersionAndExitIfRequested(cmd.Flags(), cmd.OutOrStdout()) {
				return nil
			}

			if err := initForOS(opts.config.Windows.RunAsService); err != nil {
				return fmt.Errorf("failed os init: %w", err)
			}
			if err := opts.Complete(cmd.Flags()); err != nil {
				return fmt.Errorf("failed complete: %w", err)
			}

			logs.InitLogs()
			if err := logsapi.ValidateAndApplyAsField(&opts.config.Logging, features.DefaultFeatureGate, field.NewPath("logging")); err != nil {
				return fmt.Errorf("initialize logging: %w", err)
			}
			cliflag.PrintFlags(cmd.Flags())

			if err := opts.Validate(); err != nil {
				return fmt.Errorf("failed validate: %w", err)
			}
			features.DefaultMutableFeatureGate.AddMetrics()

			// SIGTERM and SIGINT stop the process and leave the rules programmed, so
			// traffic keeps flowing across a restart or upgrade.
			// A Windows service is stopped by its control manager instead.
			ctx, serviceDone := runningService.runContext(context.Background())
			defer serviceDone()
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if err := opts.Run(ctx); err != nil {
				opts.logger.Error(err, "Error running ProxyServer")
				return err
			}
			return nil
		},
		Args: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if len(arg) > 0 {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}

	fs := cmd.Flags()
	opts.AddFlags(fs)
	fs.AddGoFlagSet(goflag.CommandLine)
	_ = cmd.MarkFlagFilename("config", "yaml", "yml", "json")
	_ = cmd.MarkFlagFilename("manifests", "yaml", "yml", "json")
	cmd.AddCommand(newTraceCommand())
	cmd.AddCommand(newStateCommand())
	return cmd
}
