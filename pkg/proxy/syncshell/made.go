package syncshell

import (
	"fmt"
	"reflect"
	"sync"

	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy"
)

// madeTypes remembers the dynamic types a Shell's makers returned, so that
// the Shell, not each backend, leaves out a port or endpoint of a type the
// backend never made (every built-in proxier once checked that itself). The
// trackers only hold what the makers made, so the check refuses nothing in a
// running proxier; it keeps a backend's type assertions safe should a maker
// change, and costs one map lookup per port or endpoint synced.
type madeTypes struct {
	ports, endpoints sync.Map // reflect.Type -> struct{}
	// customPorts and customEndpoints are set when the backend has a
	// maker; without one the trackers' base types are expected.
	customPorts, customEndpoints bool
}

// wrap returns makers that record each result's type. A nil maker stays
// nil: the trackers then make the brain's base types.
func (m *madeTypes) wrap(
	mkPort func(*v1.ServicePort, *v1.Service, *proxy.BaseServicePortInfo) proxy.ServicePort,
	mkEndpoint func(*proxy.BaseEndpointInfo, *proxy.ServicePortName) proxy.Endpoint,
) (func(*v1.ServicePort, *v1.Service, *proxy.BaseServicePortInfo) proxy.ServicePort, func(*proxy.BaseEndpointInfo, *proxy.ServicePortName) proxy.Endpoint) {
	var wp func(*v1.ServicePort, *v1.Service, *proxy.BaseServicePortInfo) proxy.ServicePort
	var we func(*proxy.BaseEndpointInfo, *proxy.ServicePortName) proxy.Endpoint
	if mkPort != nil {
		m.customPorts = true
		wp = func(p *v1.ServicePort, svc *v1.Service, base *proxy.BaseServicePortInfo) proxy.ServicePort {
			sp := mkPort(p, svc, base)
			record(&m.ports, sp)
			return sp
		}
	}
	if mkEndpoint != nil {
		m.customEndpoints = true
		we = func(base *proxy.BaseEndpointInfo, name *proxy.ServicePortName) proxy.Endpoint {
			ep := mkEndpoint(base, name)
			record(&m.endpoints, ep)
			return ep
		}
	}
	return wp, we
}

func record(types *sync.Map, v any) {
	t := reflect.TypeOf(v)
	// Load first: after the first port of a type, a sync.Map read takes no lock.
	if _, ok := types.Load(t); !ok {
		types.Store(t, struct{}{})
	}
}

// portProblem says why svc is of a type the makers never made, or "".
func (m *madeTypes) portProblem(svc proxy.ServicePort) string {
	if m.customPorts {
		if _, ok := m.ports.Load(reflect.TypeOf(svc)); ok {
			return ""
		}
	} else if _, ok := svc.(*proxy.BaseServicePortInfo); ok {
		return ""
	}
	return fmt.Sprintf("unexpected type %T", svc)
}

// endpointProblem says why ep is of a type the makers never made, or "".
func (m *madeTypes) endpointProblem(ep proxy.Endpoint) string {
	if m.customEndpoints {
		if _, ok := m.endpoints.Load(reflect.TypeOf(ep)); ok {
			return ""
		}
	} else if _, ok := ep.(*proxy.BaseEndpointInfo); ok {
		return ""
	}
	return fmt.Sprintf("unexpected type %T", ep)
}
