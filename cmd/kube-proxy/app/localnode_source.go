package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/config"
	lnclient "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
	lnserver "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/server"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// localNodeSourceOptions are --localnode-source and its TLS flags.
type localNodeSourceOptions struct {
	address   string
	clientTLS clientTLSOptions
}

// sourceLimits are the client's limits, named here so the options and the server carry
// them without importing the client.
type sourceLimits = lnclient.Limits

// addLocalNodeSourceLimitFlags registers the bounds on what the --localnode-source
// server can make this process hold.
func addLocalNodeSourceLimitFlags(fs *pflag.FlagSet, limits *lnclient.Limits) {
	fs.IntVar(&limits.MaxPendingObjects, "localnode-source-max-pending-objects", lnclient.DefaultMaxPendingObjects, "With --localnode-source, the most objects held of a state the server has not completed yet, and of the state held (MaxPendingObjects in errors). "+
		"A server that exceeds it is disconnected and asked for a full state again, after a backoff. The default fits a cluster at Kubernetes' scalability limits (about 50,000 objects) 20 times over.")
	fs.Int64Var(&limits.MaxPendingBytes, "localnode-source-max-pending-bytes", lnclient.DefaultMaxPendingBytes, "With --localnode-source, the most bytes (as encoded on the wire) held of a state the server has not completed yet (MaxPendingBytes in errors). "+
		"A server that exceeds it is disconnected and asked for a full state again, after a backoff. The default fits a cluster at Kubernetes' scalability limits (about 18 MiB) 14 times over.")
}

// validateLocalNodeSourceLimits refuses negative limits (0 takes the default).
func validateLocalNodeSourceLimits(prefix string, limits lnclient.Limits) error {
	var errs []error
	if limits.MaxPendingObjects < 0 {
		errs = append(errs, fmt.Errorf("--%smax-pending-objects %d must not be negative", prefix, limits.MaxPendingObjects))
	}
	if limits.MaxPendingBytes < 0 {
		errs = append(errs, fmt.Errorf("--%smax-pending-bytes %d must not be negative", prefix, limits.MaxPendingBytes))
	}
	return errors.Join(errs...)
}

// clientTLSOptions are a LocalNode client's TLS files, as --localnode-source-* and
// `kube-proxy state --socket-*` name them: flagPrefix is what precedes "ca-file" etc.
type clientTLSOptions struct {
	flagPrefix string
	caFile     string
	certFile   string
	keyFile    string
	serverName string
}

// addFlags registers the TLS flags of a client whose address flag is addressFlag.
func (o *clientTLSOptions) addFlags(fs *pflag.FlagSet, addressFlag string) {
	fs.StringVar(&o.caFile, o.flagPrefix+"ca-file", o.caFile, "With a tcp:// --"+addressFlag+", speak TLS (1.2 or later) and trust the server's certificate only if a CA in this PEM file signed it. Required for any host but a loopback address.")
	fs.StringVar(&o.certFile, o.flagPrefix+"tls-cert-file", o.certFile, "With --"+o.flagPrefix+"ca-file, the PEM file of a client certificate to present (for a server that requires one, e.g. started with --localnode-serve-client-ca-file).")
	fs.StringVar(&o.keyFile, o.flagPrefix+"tls-private-key-file", o.keyFile, "With --"+o.flagPrefix+"tls-cert-file, the PEM file of its private key.")
	fs.StringVar(&o.serverName, o.flagPrefix+"tls-server-name", o.serverName, "With --"+o.flagPrefix+"ca-file, the name the server's certificate must carry (by default the host of --"+addressFlag+").")
}

// validate checks the TLS flags against address (already checked by
// checkLocalNodeAddress), without reading the files.
func (o clientTLSOptions) validate(addressFlag, address string) error {
	var errs []error
	flags := []struct{ name, value string }{
		{"--" + o.flagPrefix + "ca-file", o.caFile},
		{"--" + o.flagPrefix + "tls-cert-file", o.certFile},
		{"--" + o.flagPrefix + "tls-private-key-file", o.keyFile},
		{"--" + o.flagPrefix + "tls-server-name", o.serverName},
	}
	hostPort, isTCP := strings.CutPrefix(address, "tcp://")
	if !isTCP {
		for _, f := range flags {
			if f.value != "" {
				errs = append(errs, fmt.Errorf("%s %q: TLS is only for a tcp:// --%s, not %q", f.name, f.value, addressFlag, address))
			}
		}
		return errors.Join(errs...)
	}
	if o.caFile == "" {
		for _, f := range flags[1:] {
			if f.value != "" {
				errs = append(errs, fmt.Errorf("%s %q requires --%sca-file", f.name, f.value, o.flagPrefix))
			}
		}
		if host, _, _ := net.SplitHostPort(hostPort); !lnserver.IsLoopbackHost(host) {
			errs = append(errs, fmt.Errorf("--%s %q: plain TCP is only allowed to a loopback address (127.0.0.1, ::1, localhost); set --%sca-file to speak TLS to %q", addressFlag, address, o.flagPrefix, host))
		}
	}
	if (o.certFile == "") != (o.keyFile == "") {
		errs = append(errs, fmt.Errorf("--%stls-cert-file %q and --%stls-private-key-file %q: give both or neither", o.flagPrefix, o.certFile, o.flagPrefix, o.keyFile))
	}
	return errors.Join(errs...)
}

// tlsConfig loads the client's TLS configuration; nil without a CA file.
func (o clientTLSOptions) tlsConfig() (*tls.Config, error) {
	if o.caFile == "" {
		return nil, nil
	}
	pool, err := loadCertPool("--"+o.flagPrefix+"ca-file", o.caFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: o.serverName, MinVersion: tls.VersionTLS12}
	if o.certFile != "" {
		// The client's key pair is read again when its files change, at the next
		// connection; the CA bundle is read once (a server's rotated certificate is
		// normally signed by the same CA).
		pair, err := reloadingKeyPair("--"+o.flagPrefix+"tls-cert-file", o.certFile, "--"+o.flagPrefix+"tls-private-key-file", o.keyFile)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair.get(), nil }
	}
	return cfg, nil
}

func (o localNodeSourceOptions) tlsConfig() (*tls.Config, error) { return o.clientTLS.tlsConfig() }

// addLocalNodeSourceFlags registers --localnode-source and its TLS flags.
func addLocalNodeSourceFlags(fs *pflag.FlagSet, o *localNodeSourceOptions) {
	fs.StringVar(&o.address, "localnode-source", o.address, "Run the proxy mode fed from another process's LocalNode server (one started with --localnode-serve, or any program built on pkg/proxy/localnodegrpc/server) instead of an API server or --manifests: unix:///path.sock or tcp://host:port (plain TCP: loopback only; otherwise TLS with --localnode-source-ca-file). "+
		"The server's cluster-wide Services, EndpointSlices and ServiceCIDRs feed the proxier, and its Node the topology and /healthz, as a cluster's would; the server must serve this node (see --hostname-override). "+
		"Cannot be combined with --kubeconfig, --master, --manifests or --localnode-serve.")
	o.clientTLS.flagPrefix = "localnode-source-"
	o.clientTLS.addFlags(fs, "localnode-source")
}

// validateLocalNodeSource checks --localnode-source, its TLS flags and the flags it
// cannot be combined with; the message names each flag and its value.
func validateLocalNodeSource(o localNodeSourceOptions, kubeconfig, master, manifests, serve string) error {
	address := o.address
	if address == "" {
		return o.clientTLS.validate("localnode-source", address)
	}
	var errs []error
	if err := checkLocalNodeAddress(address); err != nil {
		errs = append(errs, fmt.Errorf("--localnode-source %q: %w", address, err))
	} else if err := o.clientTLS.validate("localnode-source", address); err != nil {
		errs = append(errs, err)
	}
	var others []string
	for _, f := range []struct{ name, value string }{
		{"--kubeconfig", kubeconfig}, {"--master", master}, {"--manifests", manifests},
	} {
		if f.value != "" {
			others = append(others, fmt.Sprintf("%s %q", f.name, f.value))
		}
	}
	if len(others) > 0 {
		errs = append(errs, fmt.Errorf("--localnode-source %q cannot be combined with %s: it replaces the API server and the manifests", address, strings.Join(others, ", ")))
	}
	// The server --localnode-serve starts watches the API client, which here holds only
	// the Node: it would serve an empty cluster. A backend is fed by the server it
	// reads, and other backends can read that server too.
	if serve != "" {
		errs = append(errs, fmt.Errorf("--localnode-source %q cannot be combined with --localnode-serve %q: point other backends at the server this one reads", address, serve))
	}
	return errors.Join(errs...)
}

// checkLocalNodeAddress accepts what lnclient.Dial can reach: an absolute unix socket
// path (gRPC reads "unix://relative" as a host name) or a TCP host:port.
func checkLocalNodeAddress(address string) error {
	const want = "want unix:///absolute/path.sock or tcp://host:port"
	switch {
	case strings.HasPrefix(address, "unix://"):
		path := strings.TrimPrefix(address, "unix://")
		if !strings.HasPrefix(path, "/") || path == "/" {
			return fmt.Errorf("socket path %q is not absolute: %s", path, want)
		}
		return nil
	case strings.HasPrefix(address, "tcp://"):
		hostPort := strings.TrimPrefix(address, "tcp://")
		host, port, err := net.SplitHostPort(hostPort)
		if err != nil {
			return fmt.Errorf("%w: %s", err, want)
		}
		if host == "" {
			return fmt.Errorf("no host in %q: %s", hostPort, want)
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return fmt.Errorf("port %q is not a number from 1 to 65535: %s", port, want)
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(address); err == nil {
		return fmt.Errorf("no scheme: %s (tcp://%s, as --localnode-serve takes it)", want, address)
	}
	return errors.New(want)
}

// eventHandler is what the server's Services and EndpointSlices are delivered to: the
// proxier, and a dry run's progress tracker.
type eventHandler interface {
	config.ServiceHandler
	config.EndpointSliceHandler
}

// localNodeFeed is the binary's input with --localnode-source: a LocalNode client
// source, started before the proxier exists so that the Node is known before the
// NodeManager is built, and attached to the proxier once it is.
//
// The Node goes into an in-memory clientset that stands in for the API server (as
// with --manifests), so the NodeManager and the topology handler read it through the
// same informers as with a cluster, and a change of node IPs or podCIDRs restarts the
// process as it would there. Services and EndpointSlices go straight to the proxier:
// the source already delivers them as informers would (adds, then both synced
// signals, then changes), and a clientset in between would hold another copy of the
// cluster. The ServiceCIDRs' union goes straight to the proxier too
// (localnode_source_servicecidr.go).
type localNodeFeed struct {
	address  string
	nodeName string
	client   *fake.Clientset
	// limits bound what the server can make the client hold.
	limits lnclient.Limits
	// tls secures a tcp:// address; nil for plain text.
	tls *tls.Config
	// logger is the one of the context start was given.
	logger klog.Logger

	// nodeMu orders the Node's writes to the clientset; nodeGen counts the served
	// Node's changes and deletions, so a delayed deletion knows it was overtaken.
	nodeMu          sync.Mutex
	nodeGen         uint64
	nodeDeleteGrace time.Duration
	// nodeDeletes counts the delayed deletions not yet run, so tests can wait for
	// them instead of guessing how late a timer fires on a loaded machine.
	nodeDeletes sync.WaitGroup

	// firstState is closed when the source has delivered its first complete state (it
	// signals the Node synced last); failed when the source stopped early.
	firstState chan struct{}
	firstOnce  sync.Once
	failed     chan struct{}
	runErr     error

	mu sync.Mutex
	// pending holds what arrived before attach, for the targets to start from.
	pending  pendingFeed
	targets  []eventHandler
	attached bool
	// otherNode is the name of a Node the server served that is not this node's.
	otherNode string
	haveNode  bool

	// cidrMu guards cidrs, the union of the served ServiceCIDRs.
	cidrMu sync.Mutex
	cidrs  serviceCIDRUnion
}

var _ source.Handler = &localNodeFeed{}
var _ source.NodeHandler = &localNodeFeed{}

// newLocalNodeFeed returns a feed for the server at address (already validated), for
// the node nodeName.
func newLocalNodeFeed(address, nodeName string) *localNodeFeed {
	return &localNodeFeed{
		address: address, nodeName: nodeName,
		client: fake.NewClientset(),
		logger: klog.Background(),

		nodeDeleteGrace: 10 * time.Second,
		firstState:      make(chan struct{}),
		failed:          make(chan struct{}),
	}
}

// Client is the clientset holding this node's Node, for the NodeManager and events.
func (f *localNodeFeed) Client() clientset.Interface { return f.client }

// start runs the source until ctx is done. It reconnects on its own; it only stops
// early when the address cannot be used at all.
func (f *localNodeFeed) start(ctx context.Context) {
	f.logger = klog.FromContext(ctx)
	src := lnclient.NewSource(lnclient.Options{Address: f.address, TLS: f.tls, Limits: f.limits})
	go func() {
		if err := src.Run(ctx, f); err != nil {
			f.runErr = fmt.Errorf("--localnode-source %q: %w", f.address, err)
			close(f.failed)
		}
	}()
}

// waitFirstState blocks until the server's first complete state arrived, as a
// kube-proxy on a cluster waits for its informers to list: before it, node IPs and
// podCIDRs are unknown and the proxier would be built for the wrong node.
func (f *localNodeFeed) waitFirstState(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	select {
	case <-f.firstState:
	default:
		logger.Info("Waiting for the node-local state server", "address", f.address)
		select {
		case <-f.firstState:
		case <-f.failed:
			return f.runErr
		case <-ctx.Done():
			// The caller says why ctx ended (a dry run's deadline, a signal).
			return fmt.Errorf("--localnode-source %q: no complete state received (see the reconnect messages above)", f.address)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !f.haveNode && f.otherNode != "":
		return fmt.Errorf("--localnode-source %q serves node %q, but this kube-proxy runs as node %q: set --hostname-override %q or point it at this node's server",
			f.address, f.otherNode, f.nodeName, f.otherNode)
	case !f.haveNode:
		logger.Info("Warning: the node-local state server has no Node for this node yet; node IPs fall back to --bind-address or loopback until it does",
			"address", f.address, "nodeName", f.nodeName)
	default:
		logger.Info("Running from a node-local state server", "address", f.address, "nodeName", f.nodeName)
	}
	return nil
}

// attach delivers everything received so far, then every later event, to targets.
// The mutex orders the replay before any event that arrives meanwhile.
func (f *localNodeFeed) attach(targets ...eventHandler) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets = targets
	f.pending.replay(targets)
	f.pending, f.attached = pendingFeed{}, true
}

// pendingFeed is what the feed received before it was attached, reduced to the state
// the targets start from: each object's latest version (an object added and deleted
// meanwhile leaves nothing), the latest ServiceCIDR union and which kinds have synced.
// The server may change objects any number of times before attach, so a log of events
// would grow with the churn; this is bounded by the objects that exist, which the
// client's Limits bound.
type pendingFeed struct {
	services       map[string]*v1.Service
	slices         map[string]*discovery.EndpointSlice
	servicesSynced bool
	slicesSynced   bool
	// cidrs is the latest ServiceCIDR union handed on, if any.
	cidrs     []string
	haveCIDRs bool
}

func objectKey(namespace, name string) string { return namespace + "/" + name }

func setPending[T any](m *map[string]T, key string, obj T) {
	if *m == nil {
		*m = map[string]T{}
	}
	(*m)[key] = obj
}

// replay hands the state to targets as informers would start: each kind's adds, then
// its synced signal, then the ServiceCIDRs. Targets see nothing before this, so each
// object is an add, whatever happened to it before.
func (p *pendingFeed) replay(targets []eventHandler) {
	for _, t := range targets {
		for _, key := range slices.Sorted(maps.Keys(p.services)) {
			t.OnServiceAdd(p.services[key])
		}
		if p.servicesSynced {
			t.OnServiceSynced()
		}
		for _, key := range slices.Sorted(maps.Keys(p.slices)) {
			t.OnEndpointSliceAdd(p.slices[key])
		}
		if p.slicesSynced {
			t.OnEndpointSlicesSynced()
		}
		if ch, ok := t.(config.ServiceCIDRHandler); ok && p.haveCIDRs {
			ch.OnServiceCIDRsChanged(p.cidrs)
		}
	}
}

// deliver hands an event to the targets once attached, or records it in pending.
func (f *localNodeFeed) deliver(record func(p *pendingFeed), ev func(eventHandler)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.attached {
		record(&f.pending)
		return
	}
	for _, t := range f.targets {
		ev(t)
	}
}

func (f *localNodeFeed) OnServiceAdd(svc *v1.Service) {
	f.deliver(func(p *pendingFeed) { setPending(&p.services, objectKey(svc.Namespace, svc.Name), svc) },
		func(h eventHandler) { h.OnServiceAdd(svc) })
}
func (f *localNodeFeed) OnServiceUpdate(old, svc *v1.Service) {
	f.deliver(func(p *pendingFeed) { setPending(&p.services, objectKey(svc.Namespace, svc.Name), svc) },
		func(h eventHandler) { h.OnServiceUpdate(old, svc) })
}
func (f *localNodeFeed) OnServiceDelete(svc *v1.Service) {
	f.deliver(func(p *pendingFeed) { delete(p.services, objectKey(svc.Namespace, svc.Name)) },
		func(h eventHandler) { h.OnServiceDelete(svc) })
}
func (f *localNodeFeed) OnServiceSynced() {
	f.deliver(func(p *pendingFeed) { p.servicesSynced = true },
		func(h eventHandler) { h.OnServiceSynced() })
}
func (f *localNodeFeed) OnEndpointSliceAdd(s *discovery.EndpointSlice) {
	f.deliver(func(p *pendingFeed) { setPending(&p.slices, objectKey(s.Namespace, s.Name), s) },
		func(h eventHandler) { h.OnEndpointSliceAdd(s) })
}
func (f *localNodeFeed) OnEndpointSliceUpdate(old, s *discovery.EndpointSlice) {
	f.deliver(func(p *pendingFeed) { setPending(&p.slices, objectKey(s.Namespace, s.Name), s) },
		func(h eventHandler) { h.OnEndpointSliceUpdate(old, s) })
}
func (f *localNodeFeed) OnEndpointSliceDelete(s *discovery.EndpointSlice) {
	f.deliver(func(p *pendingFeed) { delete(p.slices, objectKey(s.Namespace, s.Name)) },
		func(h eventHandler) { h.OnEndpointSliceDelete(s) })
}
func (f *localNodeFeed) OnEndpointSlicesSynced() {
	f.deliver(func(p *pendingFeed) { p.slicesSynced = true },
		func(h eventHandler) { h.OnEndpointSlicesSynced() })
}

// OnTopologyChange is dropped: the topology reaches the proxier from the Node in the
// clientset, through the same NodeTopologyConfig as on a cluster.
func (f *localNodeFeed) OnTopologyChange(map[string]string) {}

// OnNodeChange mirrors this node's Node into the clientset. A Node of another name is
// not this node's and is not mirrored (waitFirstState reports it).
func (f *localNodeFeed) OnNodeChange(node *v1.Node) {
	ctx := context.TODO()
	f.nodeMu.Lock()
	defer f.nodeMu.Unlock()
	f.nodeGen++ // cancels a pending deletion
	if node.Name != f.nodeName {
		f.mu.Lock()
		f.otherNode = node.Name
		f.mu.Unlock()
		f.logger.Error(nil, "The node-local state server serves another node; ignoring its Node",
			"address", f.address, "servedNode", node.Name, "nodeName", f.nodeName)
		return
	}
	n := node.DeepCopy()
	// The in-memory store keeps its own resource versions; the server's would conflict.
	n.ResourceVersion = ""
	nodes := f.client.CoreV1().Nodes()
	_, err := nodes.Update(ctx, n, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = nodes.Create(ctx, n, metav1.CreateOptions{})
	}
	if err != nil {
		f.logger.Error(err, "Recording the served Node", "node", klog.KObj(node))
		return
	}
	f.mu.Lock()
	f.haveNode = true
	f.mu.Unlock()
}

// OnNodeDelete removes this node's Node after nodeDeleteGrace, unless it is served
// again meanwhile; the NodeManager then exits the process, as it does when a cluster
// deletes the Node. The grace is for a restarted server whose first state was
// complete before its own Node informer had listed: its Node comes back in the next
// batch, and the backend should not restart for it.
func (f *localNodeFeed) OnNodeDelete(node *v1.Node) {
	if node.Name != f.nodeName {
		return
	}
	f.nodeMu.Lock()
	defer f.nodeMu.Unlock()
	f.nodeGen++
	gen := f.nodeGen
	f.logger.Info("The node-local state server no longer serves this node's Node; removing it unless it comes back",
		"node", klog.KObj(node), "grace", f.nodeDeleteGrace)
	f.nodeDeletes.Add(1)
	time.AfterFunc(f.nodeDeleteGrace, func() {
		defer f.nodeDeletes.Done()
		f.nodeMu.Lock()
		defer f.nodeMu.Unlock()
		if f.nodeGen != gen {
			return
		}
		err := f.client.CoreV1().Nodes().Delete(context.TODO(), node.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			f.logger.Error(err, "Removing the served Node", "node", klog.KObj(node))
			return
		}
		f.mu.Lock()
		f.haveNode = false
		f.mu.Unlock()
	})
}

// OnNodeSynced marks the first complete state: the source signals it after the
// Services, EndpointSlices and Node of its first state.
func (f *localNodeFeed) OnNodeSynced() {
	f.firstOnce.Do(func() { close(f.firstState) })
}

// connectLocalNode sets s.Client to the feed's clientset and starts the feed; the
// caller waits for its first state before building the NodeManager.
func (s *ProxyServer) connectLocalNode(ctx context.Context, o localNodeSourceOptions) error {
	tlsConfig, err := o.tlsConfig()
	if err != nil {
		return err
	}
	s.localNode = newLocalNodeFeed(o.address, s.NodeName)
	s.localNode.tls = tlsConfig
	s.localNode.limits = s.sourceLimits
	s.Client = s.localNode.Client()
	s.localNode.start(ctx)
	return nil
}

// startLocalNodeSource is startInformers with --localnode-source: the server's Services,
// EndpointSlices and ServiceCIDRs go to the proxier (the first two to a dry run's
// tracker too), the Node through the clientset's informers as usual.
func (s *ProxyServer) startLocalNodeSource(ctx context.Context) {
	// The replay below completes both lists at once, so the first sync follows
	// straight away; the Node's zone must be known by then, or the informer delivering
	// it a moment later would make every Service's endpoints change and force a second
	// full sync. The informer then delivers the same labels, which changes nothing.
	s.seedTopology()
	targets := []eventHandler{s.Proxier}
	if s.dryRun != nil {
		targets = append(targets, s.dryRun)
	}
	s.localNode.attach(targets...)
	s.startNodeInformers(ctx)
}

// seedTopology hands the proxier the Node's topology labels before anything
// else reaches it, when the NodeManager already has the Node (as the API server
// source does with WithNodeInformer).
func (s *ProxyServer) seedTopology() {
	if node := s.NodeManager.Node(); node != nil {
		s.Proxier.OnTopologyChange(config.NodeTopologyLabels(node))
	}
}

// startNodeInformers feeds the NodeManager, and the proxier's topology, from the
// NodeManager's informer on this node's Node.
func (s *ProxyServer) startNodeInformers(ctx context.Context) {
	resync := s.Config.ConfigSyncPeriod.Duration
	nodeConfig := config.NewNodeConfig(ctx, s.NodeManager.NodeInformer(), resync)
	nodeConfig.RegisterEventHandler(s.NodeManager)
	nodeTopologyConfig := config.NewNodeTopologyConfig(ctx, s.NodeManager.NodeInformer(), resync)
	nodeTopologyConfig.RegisterEventHandler(s.Proxier)
	go nodeConfig.Run(ctx.Done())
}
