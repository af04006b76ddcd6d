package clusterdns

import (
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

func records(t *testing.T) *Records {
	t.Helper()
	svcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	eps := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	f := false
	for _, s := range []*v1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: v1.ServiceSpec{ClusterIP: "198.19.0.20", ClusterIPs: []string{"198.19.0.20"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "ns"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "foo.example.com"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "headless", Namespace: "ns"}, Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone}},
	} {
		if err := svcs.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := eps.Add(&discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "headless-1", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "headless"}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"198.18.64.5"}},
			{Addresses: []string{"198.18.64.6"}, Conditions: discoveryv1.EndpointConditions{Ready: &f}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	return &Records{Domain: "cluster.local", Services: corelisters.NewServiceLister(svcs), Endpoints: discoverylisters.NewEndpointSliceLister(eps)}
}

func TestLookup(t *testing.T) {
	r := records(t)
	tests := []struct {
		name  string
		found bool
		addrs []string
		cname string
	}{
		{name: "web.ns.svc.cluster.local.", found: true, addrs: []string{"198.19.0.20"}},
		{name: "WEB.ns.svc.cluster.local", found: true, addrs: []string{"198.19.0.20"}},
		{name: "ext.ns.svc.cluster.local.", found: true, cname: "foo.example.com"},
		{name: "headless.ns.svc.cluster.local.", found: true, addrs: []string{"198.18.64.5"}}, // not-ready endpoint left out
		{name: "missing.ns.svc.cluster.local."},
		{name: "web.other.svc.cluster.local."},
		{name: "google.com."}, // never forwarded
		{name: "web.ns.svc.cluster.local.ns.svc.cluster.local."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := r.Lookup(tc.name)
			if a.Found != tc.found || a.CNAME != tc.cname || len(a.Addrs) != len(tc.addrs) {
				t.Fatalf("Lookup(%q) = %+v, want found=%v addrs=%v cname=%q", tc.name, a, tc.found, tc.addrs, tc.cname)
			}
			for i, want := range tc.addrs {
				if a.Addrs[i] != netip.MustParseAddr(want) {
					t.Errorf("addr %d = %v, want %s", i, a.Addrs[i], want)
				}
			}
		})
	}
}

func TestRespond(t *testing.T) {
	r := records(t)
	for _, tc := range []struct {
		name  string
		rcode dnsmessage.RCode
		wantA int
	}{
		{"web.ns.svc.cluster.local.", dnsmessage.RCodeSuccess, 1},
		{"nope.ns.svc.cluster.local.", dnsmessage.RCodeNameError, 0},
	} {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
		_ = b.StartQuestions()
		_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(tc.name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		q, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Respond(q)
		if err != nil {
			t.Fatal(err)
		}
		var m dnsmessage.Message
		if err := m.Unpack(out); err != nil {
			t.Fatal(err)
		}
		if m.Header.ID != 7 || m.Header.RCode != tc.rcode || len(m.Answers) != tc.wantA {
			t.Errorf("%s: header %+v, %d answers; want rcode %v, %d answers", tc.name, m.Header, len(m.Answers), tc.rcode, tc.wantA)
		}
	}
}
