package proxy

import (
	"cmp"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/kube-proxy/pkg/proxy/config"
)

// Provider is the interface every proxier implements: it consumes Service,
// EndpointSlice, topology and ServiceCIDR events and programs the data plane.
type Provider interface {
	config.EndpointSliceHandler
	config.ServiceHandler
	config.NodeTopologyHandler
	config.ServiceCIDRHandler

	// Sync programs the data plane now, without waiting for the next
	// scheduled sync.
	Sync()
	// SyncLoop runs periodic syncs; it never returns.
	SyncLoop()
}

// ServicePortName identifies one port of one Service. It is comparable and
// used as a map key throughout the proxiers.
type ServicePortName struct {
	types.NamespacedName
	Port     string
	Protocol v1.Protocol
}

// String returns "namespace/name", plus ":port" when the port is named.
// Proxiers hash this string into chain names, so its format is fixed.
func (spn ServicePortName) String() string {
	s := spn.Namespace + "/" + spn.Name
	if spn.Port != "" {
		s += ":" + spn.Port
	}
	return s
}

// CompareServicePortNames orders service ports by namespace, name, port name
// and protocol, the order the proxiers write and report them in.
func CompareServicePortNames(a, b ServicePortName) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name),
		strings.Compare(a.Port, b.Port), strings.Compare(string(a.Protocol), string(b.Protocol)))
}

// ServiceEndpoint names one endpoint ("ip:port") of one service port.
type ServiceEndpoint struct {
	Endpoint        string
	ServicePortName ServicePortName
}
