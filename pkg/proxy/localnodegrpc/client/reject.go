package client

import (
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// Rejected is an object of a batch the client could not decode and skipped. The rest of
// the batch applies: one bad object must not keep a node from programming every other
// Service. What the client held under the same name, if anything, is kept, as the
// manifest source keeps the objects of a file that does not read cleanly.
type Rejected struct {
	// Op is the object's index in Batch.Ops.
	Op int
	// Kind is the wire message: "Service", "ServiceKey" (a node-local deletion),
	// "GlobalService", "EndpointSlice", "Node", "ServiceCIDR", or "Op" for an op with
	// nothing set.
	Kind string
	// Object names it ("namespace/name", a node-local service's port name, or a
	// cluster-scoped name); empty when the name itself is what did not decode.
	Object string
	// Err names the field and the value that did not decode.
	Err error
}

func (r Rejected) Error() string {
	return fmt.Sprintf("ops[%d]: %v", r.Op, r.Err)
}

// rejectedObjects counts the objects skipped by kind.
var rejectedObjects = metrics.NewCounterVec(&metrics.CounterOpts{
	Subsystem:      "kubeproxy",
	Name:           "localnode_client_rejected_objects_total",
	Help:           "Objects received from a node-local state server that did not decode and were skipped, by kind",
	StabilityLevel: metrics.ALPHA,
}, []string{"kind"})

var registerOnce sync.Once

// RegisterMetrics registers the client's metrics (kubeproxy_localnode_client_*) in the
// component-base legacy registry, once per process; Source.Run and RunBackend call it.
// Until it is called they count nothing.
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(rejectedObjects) })
}

// reportRejected logs each rejected object at error level and counts it.
func reportRejected(logger klog.Logger, address string, rejected []Rejected) {
	for _, r := range rejected {
		rejectedObjects.WithLabelValues(r.Kind).Inc()
		logger.Error(r.Err, "Skipping an object the node-local state server sent that does not decode; the rest of the state applies",
			"address", address, "kind", r.Kind, "object", r.Object, "op", r.Op)
	}
}

// isUnknownOp tells an op of a kind newer than this client (its oneof arrives as unknown
// fields, skipped as the compatibility rules allow) from an op with nothing set.
func isUnknownOp(m proto.Message) bool {
	return len(m.ProtoReflect().GetUnknown()) > 0
}
