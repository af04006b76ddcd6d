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
	return madeProblem[*proxy.BaseServicePortInfo](m.customPorts, &m.ports, svc)
}

// endpointProblem says why ep is of a type the makers never made, or "".
func (m *madeTypes) endpointProblem(ep proxy.Endpoint) string {
	return madeProblem[*proxy.BaseEndpointInfo](m.customEndpoints, &m.endpoints, ep)
}

// madeProblem checks v against the types a custom maker returned, or
// without one against the trackers' base type Base.
func madeProblem[Base any](custom bool, made *sync.Map, v any) string {
	if custom {
		if _, ok := made.Load(reflect.TypeOf(v)); ok {
			return ""
		}
	} else if _, ok := v.(Base); ok {
		return ""
	}
	return fmt.Sprintf("unexpected type %T", v)
}
