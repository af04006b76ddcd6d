package manifests

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/source"
)

// Source is a source.Source reading Services, EndpointSlices and Nodes from YAML or JSON
// files under a path, re-read whenever they change. Objects must be complete (cluster
// IPs, node ports): nothing allocates them. The Node named like this node, when the
// files hold one, supplies its topology labels and is delivered to handlers that
// implement source.NodeHandler, as a cluster's would be.
type Source struct {
	src      *Reader
	nodeName string
	rescan   time.Duration
}

var _ source.Source = &Source{}

// New returns a source for path (a file or a directory), for the node nodeName. rescan
// bounds how long a missed file-system event goes unnoticed (DefaultRescanPeriod
// when 0).
func New(path, nodeName string, rescan time.Duration) *Source {
	return &Source{src: NewReader(path), nodeName: nodeName, rescan: rescan}
}

// Reader returns the underlying manifest reader (its Objects, Path and Client), for
// programs that report what was read. Reader is not part of the library's stable API
// (docs/versioning.md).
func (m *Source) Reader() *Reader { return m.src }

// Run implements source.Source. It reads the manifests once before starting the
// informers, so the initial adds (and the synced signals) already cover every file, and
// fails if the path cannot be read.
func (m *Source) Run(ctx context.Context, h source.Handler) error {
	if _, err := m.src.Sync(ctx); err != nil {
		return err
	}
	go func() {
		if err := m.src.Run(ctx, m.rescan); err != nil {
			klog.FromContext(ctx).Error(err, "Manifest source stopped", "path", m.src.Path())
		}
	}()
	return source.NewKubernetes(m.src.Client(), m.nodeName, 0).Run(ctx, h)
}

// DeliversServiceCIDRs implements source.ServiceCIDRSource: the manifests' ServiceCIDRs
// reach a Handler that implements source.ServiceCIDRHandler.
func (m *Source) DeliversServiceCIDRs() bool { return true }
