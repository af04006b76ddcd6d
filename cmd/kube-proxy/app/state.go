package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/component-base/config"
	nodeutil "k8s.io/component-helpers/node/util"
	"sigs.k8s.io/yaml"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	lnclient "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
	lnserver "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/server"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
	manifestsource "k8s.io/kube-proxy/pkg/proxy/source/manifests"
)

// stateOptions are the flags of `kube-proxy state`.
type stateOptions struct {
	kubeconfig, master string
	manifests          string
	socket             string
	socketTLS          clientTLSOptions
	hostname           string
	output             string
	global             bool
	timeout            time.Duration

	// limits are --max-pending-objects and --max-pending-bytes (with --socket).
	limits sourceLimits
}

// newStateCommand is `kube-proxy state`: print the node-local state (and, with
// --global, the cluster-wide objects it comes from) as YAML or JSON, read from an API
// server, manifests, or a running kube-proxy's --localnode-serve socket.
func newStateCommand() *cobra.Command {
	o := &stateOptions{output: "yaml", timeout: time.Minute, socketTLS: clientTLSOptions{flagPrefix: "socket-"}}
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Print the node-local state this node's proxy programs, as YAML or JSON",
		Long: `Print what this node's service proxy must program: every service port of each
IP family with the endpoints the node may use (after topology, traffic policies and
terminating-endpoint fallback), computed from an API server (--kubeconfig/--master),
from --manifests, or read from a running kube-proxy's node-local state socket
(--socket, see --localnode-serve). --global adds the cluster-wide Services,
EndpointSlices and this Node as the proxy received them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return o.run(ctx, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Path to a kubeconfig file (in-cluster configuration when neither it, --master, --manifests nor --socket is set).")
	fs.StringVar(&o.master, "master", o.master, "The address of the Kubernetes API server (overrides any value in kubeconfig).")
	fs.StringVar(&o.manifests, "manifests", o.manifests, "Read Services, EndpointSlices and Nodes from this YAML/JSON file or directory instead of an API server.")
	fs.StringVar(&o.socket, "socket", o.socket, "Read the state from a running kube-proxy serving it (unix:///path or tcp://host:port), e.g. "+lnclient.DefaultAddress+".")
	o.socketTLS.addFlags(fs, "socket")
	fs.StringVar(&o.hostname, "hostname-override", o.hostname, "The node to compute the state for (the hostname when empty). Ignored with --socket.")
	fs.StringVarP(&o.output, "output", "o", o.output, "Output format: yaml or json.")
	fs.BoolVar(&o.global, "global", o.global, "Also print the cluster-wide Services, EndpointSlices and Node before node-local filtering.")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "Give up when no complete state arrived within this time.")
	addStateLimitFlags(fs, &o.limits)
	_ = cmd.MarkFlagFilename("manifests", "yaml", "yml", "json")
	return cmd
}

func (o *stateOptions) validate() error {
	if o.output != "yaml" && o.output != "json" {
		return fmt.Errorf("--output %q: want yaml or json", o.output)
	}
	n := 0
	for _, set := range []bool{o.socket != "", o.manifests != "", o.kubeconfig != "" || o.master != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("--socket, --manifests and --kubeconfig/--master are alternatives: give one")
	}
	if o.socket != "" {
		if err := checkLocalNodeAddress(o.socket); err != nil {
			return fmt.Errorf("--socket %q: %w", o.socket, err)
		}
	}
	if err := o.socketTLS.validate("socket", o.socket); err != nil {
		return err
	}
	return validateLocalNodeSourceLimits("", o.limits)
}

// addStateLimitFlags registers the bounds on what the --socket server can make `state`
// hold before its state is complete.
func addStateLimitFlags(fs *pflag.FlagSet, limits *sourceLimits) {
	fs.IntVar(&limits.MaxPendingObjects, "max-pending-objects", lnclient.DefaultMaxPendingObjects, "With --socket, give up (naming MaxPendingObjects) when the server sent more objects than this without completing its state.")
	fs.Int64Var(&limits.MaxPendingBytes, "max-pending-bytes", lnclient.DefaultMaxPendingBytes, "With --socket, give up (naming MaxPendingBytes) when the server sent more bytes than this, as encoded on the wire, without completing its state.")
}

func (o *stateOptions) run(ctx context.Context, out io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("no complete state within --timeout %v", o.timeout))
	defer cancel()
	req := &localnodev1.WatchRequest{NodeLocal: true, Global: o.global}
	var ops []*localnodev1.Op
	var instance string
	var revision uint64
	if o.socket != "" {
		tlsConfig, err := o.socketTLS.tlsConfig()
		if err != nil {
			return err
		}
		conn, err := lnclient.Dial(o.socket, tlsConfig)
		if err != nil {
			return err
		}
		defer conn.Close()
		done := fmt.Errorf("done")
		_, _, err = lnclient.WatchOnceWithLimits(ctx, conn, req, o.limits, func(b *lnclient.Batch) error {
			ops, instance, revision = b.Ops, b.Instance, b.Revision
			return done
		})
		if err != done {
			return fmt.Errorf("reading the state from %s: %w", o.socket, err)
		}
	} else {
		node, err := nodeutil.GetHostname(o.hostname)
		if err != nil {
			return fmt.Errorf("--hostname-override %q: %w", o.hostname, err)
		}
		var src source.Source
		if o.manifests != "" {
			m := manifestsource.New(o.manifests, node, 0)
			if err := readManifestsOnce(ctx, m); err != nil {
				return err
			}
			src = m
		} else {
			client, err := createClient(ctx, config.ClientConnectionConfiguration{Kubeconfig: o.kubeconfig, QPS: 5, Burst: 10, ContentType: "application/vnd.kubernetes.protobuf"}, o.master)
			if err != nil {
				return err
			}
			src = source.NewKubernetes(client, node, 0)
		}
		srv, err := lnserver.New(lnserver.Options{Proxy: proxyrun.Options{NodeName: node, Families: []localnode.Family{localnode.IPv4, localnode.IPv6}}})
		if err != nil {
			return err
		}
		runCtx, stopRun := context.WithCancel(ctx)
		runDone := make(chan error, 1)
		go func() { runDone <- srv.Run(runCtx, src) }()
		ops, revision, err = srv.Snapshot(ctx, req)
		stopRun()
		if runErr := <-runDone; err == nil && runErr != nil {
			err = runErr
		}
		if err != nil {
			return err
		}
		instance = srv.InstanceID()
	}
	return renderState(out, o.output, instance, revision, ops)
}

// stateDocument is what `kube-proxy state` prints: the proto messages in their JSON
// mapping (field names in lowerCamelCase), so the output reads like the wire schema.
type stateDocument struct {
	Instance       string            `json:"instanceId"`
	Revision       uint64            `json:"revision"`
	Services       []json.RawMessage `json:"services"`
	GlobalServices []json.RawMessage `json:"globalServices,omitempty"`
	EndpointSlices []json.RawMessage `json:"endpointSlices,omitempty"`
	ServiceCIDRs   []json.RawMessage `json:"serviceCIDRs,omitempty"`
	Node           json.RawMessage   `json:"node,omitempty"`
}

// marshalAll renders each message in its proto JSON mapping.
func marshalAll[T proto.Message](m protojson.MarshalOptions, msgs []T) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(msgs))
	for _, msg := range msgs {
		b, err := m.Marshal(msg)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func renderState(out io.Writer, format, instance string, revision uint64, ops []*localnodev1.Op) error {
	var services []*localnodev1.Service
	var globals []*localnodev1.GlobalService
	var slicesList []*localnodev1.EndpointSlice
	var cidrs []*localnodev1.ServiceCIDR
	var node *localnodev1.Node
	for _, op := range ops {
		switch o := op.GetOp().(type) {
		case *localnodev1.Op_SetService:
			services = append(services, o.SetService)
		case *localnodev1.Op_SetGlobalService:
			globals = append(globals, o.SetGlobalService)
		case *localnodev1.Op_SetEndpointSlice:
			slicesList = append(slicesList, o.SetEndpointSlice)
		case *localnodev1.Op_SetServiceCidr:
			cidrs = append(cidrs, o.SetServiceCidr)
		case *localnodev1.Op_SetNode:
			node = o.SetNode
		}
	}
	slices.SortFunc(services, func(a, b *localnodev1.Service) int {
		return cmp.Or(cmp.Compare(a.GetFamily(), b.GetFamily()), cmp.Compare(a.GetName().GetNamespace(), b.GetName().GetNamespace()),
			cmp.Compare(a.GetName().GetName(), b.GetName().GetName()), cmp.Compare(a.GetName().GetPort(), b.GetName().GetPort()),
			cmp.Compare(a.GetName().GetProtocol(), b.GetName().GetProtocol()))
	})
	slices.SortFunc(globals, func(a, b *localnodev1.GlobalService) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	slices.SortFunc(slicesList, func(a, b *localnodev1.EndpointSlice) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	m := protojson.MarshalOptions{UseProtoNames: false}
	slices.SortFunc(cidrs, func(a, b *localnodev1.ServiceCIDR) int { return cmp.Compare(a.GetName(), b.GetName()) })
	doc := stateDocument{Instance: instance, Revision: revision}
	var err error
	if doc.Services, err = marshalAll(m, services); err != nil {
		return err
	}
	if doc.GlobalServices, err = marshalAll(m, globals); err != nil {
		return err
	}
	if doc.EndpointSlices, err = marshalAll(m, slicesList); err != nil {
		return err
	}
	if doc.ServiceCIDRs, err = marshalAll(m, cidrs); err != nil {
		return err
	}
	if node != nil {
		b, err := m.Marshal(node)
		if err != nil {
			return err
		}
		doc.Node = b
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = out.Write(b)
	return err
}

// readManifestsOnce reads the manifests before the state is computed from
// them. The source would log a missing path or a bad document and carry
// on, as a proxy following the files must (a later edit may fix them), but
// this command prints one state now: waiting out --timeout cannot fix the
// files, and a state without the documents that failed would look
// complete. So any of those errors ends the command at once, naming the
// files and lines.
func readManifestsOnce(ctx context.Context, m *manifestsource.Source) error {
	res, err := m.Reader().Sync(ctx)
	if err != nil {
		return fmt.Errorf("--manifests %q: %w", m.Reader().Path(), err)
	}
	if len(res.Problems) > 0 {
		errs := make([]error, 0, len(res.Problems))
		for _, p := range res.Problems {
			errs = append(errs, p)
		}
		return fmt.Errorf("--manifests %q: %d documents could not be read: %w", m.Reader().Path(), len(res.Problems), errors.Join(errs...))
	}
	return nil
}
