package source

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// cidrRecorder records ServiceCIDR events beside the Recorder's.
type cidrRecorder struct{ st.Recorder }

func (r *cidrRecorder) OnServiceCIDRAdd(c *networkingv1.ServiceCIDR) {
	r.Add("cidr-add %s %v", c.Name, c.Spec.CIDRs)
}
func (r *cidrRecorder) OnServiceCIDRUpdate(_, c *networkingv1.ServiceCIDR) {
	r.Add("cidr-update %s %v", c.Name, c.Spec.CIDRs)
}
func (r *cidrRecorder) OnServiceCIDRDelete(c *networkingv1.ServiceCIDR) {
	r.Add("cidr-delete %s", c.Name)
}
func (r *cidrRecorder) OnServiceCIDRsSynced() { r.Add("cidrs-synced") }

func serviceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

// The Kubernetes source (and so the manifests source built on it) delivers ServiceCIDRs
// to a handler that wants them: existing ones before cidrs-synced, then changes.
func TestKubernetesServiceCIDRs(t *testing.T) {
	client := fake.NewClientset(serviceCIDR("kubernetes", "10.96.0.0/16", "fd00:96::/112"))
	var src ServiceCIDRSource = NewKubernetes(client, "", 0)
	if !src.DeliversServiceCIDRs() {
		t.Fatal("the Kubernetes source says it delivers no ServiceCIDRs")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	h := &cidrRecorder{}
	go func() { _ = src.Run(ctx, h); close(done) }()
	h.WaitFor(t, "cidrs-synced")
	ev := h.Snapshot()
	add, synced := slices.Index(ev, "cidr-add kubernetes [10.96.0.0/16 fd00:96::/112]"), slices.Index(ev, "cidrs-synced")
	if add < 0 || add > synced {
		t.Fatalf("want the existing ServiceCIDR added before cidrs-synced, got %v", ev)
	}

	cidrs := client.NetworkingV1().ServiceCIDRs()
	for _, step := range []struct {
		do   func() error
		want string
	}{
		{func() error {
			_, err := cidrs.Create(ctx, serviceCIDR("extra", "198.19.0.0/16"), metav1.CreateOptions{})
			return err
		}, "cidr-add extra [198.19.0.0/16]"},
		{func() error {
			_, err := cidrs.Update(ctx, serviceCIDR("extra", "198.19.0.0/16", "fd00:19::/112"), metav1.UpdateOptions{})
			return err
		}, "cidr-update extra [198.19.0.0/16 fd00:19::/112]"},
		{func() error { return cidrs.Delete(ctx, "kubernetes", metav1.DeleteOptions{}) }, "cidr-delete kubernetes"},
	} {
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		h.WaitFor(t, step.want)
	}
}

// A handler without the ServiceCIDR methods gets Services and EndpointSlices as before.
func TestKubernetesServiceCIDRsOptional(t *testing.T) {
	client := fake.NewClientset(serviceCIDR("kubernetes", "10.96.0.0/16"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	h := &st.Recorder{}
	go func() { _ = NewKubernetes(client, "", 0).Run(ctx, h); close(done) }()
	h.WaitFor(t, "svc-synced")
	h.WaitFor(t, "slices-synced")
}

// Without ServiceCIDRs (an API server that refuses to list them, as RBAC without
// servicecidrs does) the source neither watches them nor claims to deliver them, so a
// consumer does not wait for a list that never comes.
func TestKubernetesWithoutServiceCIDRs(t *testing.T) {
	client := fake.NewClientset(serviceCIDR("kubernetes", "10.96.0.0/16"))
	var lists atomic.Int32
	client.PrependReactor("list", "servicecidrs", func(clienttesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return true, nil, apierrors.NewForbidden(networkingv1.Resource("servicecidrs"), "", nil)
	})
	src := NewKubernetes(client, "", 0).WithoutServiceCIDRs()
	if src.DeliversServiceCIDRs() {
		t.Fatal("DeliversServiceCIDRs after WithoutServiceCIDRs")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	h := &cidrRecorder{}
	go func() { _ = src.Run(ctx, h); close(done) }()
	h.WaitFor(t, "svc-synced")
	h.WaitFor(t, "slices-synced")
	if n := lists.Load(); n != 0 {
		t.Fatalf("ServiceCIDRs listed %d times", n)
	}
	for _, ev := range h.Snapshot() {
		if strings.HasPrefix(ev, "cidr") {
			t.Fatalf("ServiceCIDR event %q delivered", ev)
		}
	}
}
