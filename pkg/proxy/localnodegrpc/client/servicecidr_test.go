package client_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

func serviceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

func setCIDR(name string, cidrs ...string) *localnodev1.Op {
	return &localnodev1.Op{Op: &localnodev1.Op_SetServiceCidr{SetServiceCidr: &localnodev1.ServiceCIDR{Name: name, Cidrs: cidrs}}}
}

// The global view holds ServiceCIDRs by name; a batch with a bad one fails as a whole,
// naming the op, the object and the value, and leaves the held view as it was.
func TestGlobalApplyServiceCIDRs(t *testing.T) {
	held, err := (&client.Global{}).Apply(&client.Batch{Reset: true, Ops: []*localnodev1.Op{setCIDR("kubernetes", "10.96.0.0/12"), setCIDR("extra", "198.19.0.0/16")}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		ops     []*localnodev1.Op
		want    map[string][]string
		wantErr string
	}{
		{name: "update", ops: []*localnodev1.Op{setCIDR("extra", "198.19.0.0/16", "fd00:19::/112")},
			want: map[string][]string{"kubernetes": {"10.96.0.0/12"}, "extra": {"198.19.0.0/16", "fd00:19::/112"}}},
		{name: "delete", ops: []*localnodev1.Op{{Op: &localnodev1.Op_DeleteServiceCidr{DeleteServiceCidr: &localnodev1.ObjectKey{Name: "extra"}}}},
			want: map[string][]string{"kubernetes": {"10.96.0.0/12"}}},
		{name: "bad CIDR", ops: []*localnodev1.Op{setCIDR("new", "10.0.0.0/8"), setCIDR("kubernetes", "10.96.0.1")},
			wantErr: `ops[1]: service cidr kubernetes: cidrs[0]: "10.96.0.1" is not a CIDR`},
		{name: "no name", ops: []*localnodev1.Op{setCIDR("", "10.0.0.0/8")}, wantErr: "ops[0]: service cidr: name: missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next, err := held.Apply(&client.Batch{Ops: tc.ops})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want %q", err, tc.wantErr)
				}
				next = held
			} else if err != nil {
				t.Fatal(err)
			} else {
				got := map[string][]string{}
				for k, c := range next.ServiceCIDRs {
					got[k.Name] = c.Spec.CIDRs
				}
				if len(got) != len(tc.want) {
					t.Errorf("got %v, want %v", got, tc.want)
				}
				for name, cidrs := range tc.want {
					if !slices.Equal(got[name], cidrs) {
						t.Errorf("%s: got %v, want %v", name, got[name], cidrs)
					}
				}
			}
			if c := held.ServiceCIDRs[types.NamespacedName{Name: "extra"}]; len(held.ServiceCIDRs) != 2 || c == nil || len(c.Spec.CIDRs) != 1 {
				t.Errorf("held view changed: %v", held.ServiceCIDRs)
			}
		})
	}
}

// cidrRecorder records a source's events, ServiceCIDRs among them.
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

// The client source hands on the server's ServiceCIDRs: those of the first state before
// the synced signals (so a proxier knows them by its first sync), then changes.
func TestSourceDeliversServiceCIDRs(t *testing.T) {
	kube := fake.NewClientset(st.Node(node, "z1"), serviceCIDR("kubernetes", "10.96.0.0/12", "fd00:96::/112"))
	addr := "unix://" + filepath.Join(t.TempDir(), "ln.sock")
	serve(t, source.NewKubernetes(kube, node, 0), addr)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	h := &cidrRecorder{}
	src := client.NewSource(client.Options{Address: addr})
	if !src.DeliversServiceCIDRs() {
		t.Fatal("the client source says it delivers no ServiceCIDRs")
	}
	go func() { _ = src.Run(ctx, h); close(done) }()
	h.WaitFor(t, "svc-synced")
	ev := h.Snapshot()
	add, cidrsSynced, svcSynced := slices.Index(ev, "cidr-add kubernetes [10.96.0.0/12 fd00:96::/112]"), slices.Index(ev, "cidrs-synced"), slices.Index(ev, "svc-synced")
	if add < 0 || cidrsSynced < add || svcSynced < cidrsSynced {
		t.Fatalf("want cidr-add, cidrs-synced, then svc-synced; got %v", ev)
	}

	cidrs := kube.NetworkingV1().ServiceCIDRs()
	if _, err := cidrs.Update(ctx, serviceCIDR("kubernetes", "10.96.0.0/12"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.WaitFor(t, "cidr-update kubernetes [10.96.0.0/12]")
	if err := cidrs.Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.WaitFor(t, "cidr-delete kubernetes")
	if n := strings.Count(strings.Join(h.Snapshot(), "\n"), "cidrs-synced"); n != 1 {
		t.Errorf("cidrs-synced delivered %d times, want once", n)
	}
}
