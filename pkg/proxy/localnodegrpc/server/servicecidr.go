package server

import (
	networkingv1 "k8s.io/api/networking/v1"

	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// ServiceCIDRs are served in the global view only: they do not change the node-local
// State (the brain does not read them), so they go to the store and no further. The
// handler the tee wraps is still given them when it wants them.

func (t *teeHandler) setServiceCIDR(c *networkingv1.ServiceCIDR) {
	t.s.store.commit([]change{{
		key: key{kind: kindServiceCIDR, name: c.Name},
		op:  &localnodev1.Op{Op: &localnodev1.Op_SetServiceCidr{SetServiceCidr: localnodev1.ServiceCIDRFromAPI(c)}},
	}})
}

func (t *teeHandler) OnServiceCIDRAdd(c *networkingv1.ServiceCIDR) {
	t.setServiceCIDR(c)
	if ch, ok := t.h.(source.ServiceCIDRHandler); ok {
		ch.OnServiceCIDRAdd(c)
	}
}

func (t *teeHandler) OnServiceCIDRUpdate(old, c *networkingv1.ServiceCIDR) {
	t.setServiceCIDR(c)
	if ch, ok := t.h.(source.ServiceCIDRHandler); ok {
		ch.OnServiceCIDRUpdate(old, c)
	}
}

func (t *teeHandler) OnServiceCIDRDelete(c *networkingv1.ServiceCIDR) {
	t.s.store.commit([]change{{
		key: key{kind: kindServiceCIDR, name: c.Name}, del: true,
		op: &localnodev1.Op{Op: &localnodev1.Op_DeleteServiceCidr{DeleteServiceCidr: &localnodev1.ObjectKey{Name: c.Name}}},
	}})
	if ch, ok := t.h.(source.ServiceCIDRHandler); ok {
		ch.OnServiceCIDRDelete(c)
	}
}

func (t *teeHandler) OnServiceCIDRsSynced() {
	if ch, ok := t.h.(source.ServiceCIDRHandler); ok {
		ch.OnServiceCIDRsSynced()
	}
	t.s.mu.Lock()
	t.s.cidrsSynced = true
	t.s.mu.Unlock()
	t.s.checkReady()
}
