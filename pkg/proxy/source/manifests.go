package source

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/manifest"
)

// Manifests is a Source reading Services, EndpointSlices and Nodes from YAML or JSON files
// under a path, re-read whenever they change. Objects must be complete (cluster IPs, node
// ports): nothing allocates them.
type Manifests struct {
	src      *manifest.Source
	nodeName string
	rescan   time.Duration
}

// NewManifests returns a source for path (a file or a directory), with nodeName's topology
// labels taken from a Node in the manifests if there is one. rescan bounds how long a
// missed file-system event goes unnoticed (manifest.DefaultRescanPeriod when 0).
func NewManifests(path, nodeName string, rescan time.Duration) *Manifests {
	return &Manifests{src: manifest.NewSource(path), nodeName: nodeName, rescan: rescan}
}

// Manifest returns the underlying manifest reader (its Objects, Path and Client).
func (m *Manifests) Manifest() *manifest.Source { return m.src }

// Run implements Source. It reads the manifests once before starting the informers, so
// the initial adds (and the synced signals) already cover every file, and fails if the
// path cannot be read.
func (m *Manifests) Run(ctx context.Context, h Handler) error {
	if _, err := m.src.Sync(ctx); err != nil {
		return err
	}
	go func() {
		if err := m.src.Run(ctx, m.rescan); err != nil {
			klog.FromContext(ctx).Error(err, "Manifest source stopped", "path", m.src.Path())
		}
	}()
	return NewKubernetes(m.src.Client(), m.nodeName, 0).Run(ctx, h)
}
