//go:build linux

package kubeapiserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

func TestFindBinaries(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "exe")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExe := filepath.Join(dir, "data")
	if err := os.WriteFile(notExe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		apiserver, etcd  string
		cache            string
		wantErr          []string
		wantAPI, wantEtc string
	}{
		{name: "env wins", apiserver: exe, etcd: exe, cache: "/nonexistent", wantAPI: exe, wantEtc: exe},
		{name: "missing from cache", cache: filepath.Join(dir, "empty"),
			wantErr: []string{"kube-apiserver-" + APIServerVersion, "etcd-" + EtcdVersion, "hack/build-fixtures.sh"}},
		{name: "not executable", apiserver: notExe, etcd: exe, wantErr: []string{"not an executable", "$KUBE_APISERVER_BIN"}},
		{name: "directory", apiserver: exe, etcd: dir, wantErr: []string{"not an executable", "$ETCD_BIN"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBE_APISERVER_BIN", tc.apiserver)
			t.Setenv("ETCD_BIN", tc.etcd)
			t.Setenv("KUBE_PROXY_FIXTURE_CACHE", tc.cache)
			b, err := FindBinaries()
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, got %+v", b)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.APIServer != tc.wantAPI || b.Etcd != tc.wantEtc {
				t.Errorf("got %+v", b)
			}
		})
	}
}

func TestWritePKI(t *testing.T) {
	dir := t.TempDir()
	f, err := writePKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range Identities {
		cfgPath := filepath.Join(dir, string(id)+".kubeconfig")
		s := &Server{pki: f, Dir: dir}
		if err := s.WriteKubeconfig(id, "https://127.0.0.1:1", cfgPath); err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", cfgPath)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if cfg.Host != "https://127.0.0.1:1" || cfg.CertFile != f.clientCert[id] {
			t.Errorf("%s: kubeconfig gives %s %s", id, cfg.Host, cfg.CertFile)
		}
	}
}

// The real server: each identity gets exactly the permissions the tests rely on,
// and data and port survive Stop/Restart and Kill/Restart.
func TestServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver; skipped with -short")
	}
	s := Start(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	admin, err := s.Client(Admin)
	if err != nil {
		t.Fatal(err)
	}
	info, err := admin.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if info.GitVersion != APIServerVersion {
		t.Errorf("server version %q, want %q", info.GitVersion, APIServerVersion)
	}
	if _, err := admin.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil {
		t.Errorf("default ServiceCIDR: %v", err)
	}

	type check struct {
		verb, group, resource string
	}
	perms := []struct {
		id      Identity
		allowed []check
		denied  []check
	}{
		{id: KubeProxy,
			allowed: []check{{"list", "", "services"}, {"watch", "discovery.k8s.io", "endpointslices"}, {"get", "", "nodes"},
				{"watch", "networking.k8s.io", "servicecidrs"}, {"create", "events.k8s.io", "events"}},
			denied: []check{{"create", "", "services"}, {"update", "discovery.k8s.io", "endpointslices"}}},
		{id: Unprivileged,
			denied: []check{{"list", "", "services"}, {"list", "", "nodes"}, {"create", "events.k8s.io", "events"}}},
	}
	for _, p := range perms {
		c, err := s.Client(p.id)
		if err != nil {
			t.Fatal(err)
		}
		ask := func(ch check) bool {
			r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: ch.verb, Group: ch.group, Resource: ch.resource}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("%s: access review: %v", p.id, err)
			}
			return r.Status.Allowed
		}
		for _, ch := range p.allowed {
			if !ask(ch) {
				t.Errorf("%s may not %s %s.%s", p.id, ch.verb, ch.resource, ch.group)
			}
		}
		for _, ch := range p.denied {
			if ask(ch) {
				t.Errorf("%s may %s %s.%s", p.id, ch.verb, ch.resource, ch.group)
			}
		}
	}
	nobody, _ := s.Client(Unprivileged)
	if _, err := nobody.CoreV1().Services("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("unprivileged list services: %v, want forbidden", err)
	}

	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: "default"},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeNodePort, Ports: []v1.ServicePort{{Port: 80}}},
	}
	created, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.ClusterIP == "" || created.Spec.Ports[0].NodePort == 0 {
		t.Errorf("no allocation: %+v", created.Spec)
	}

	port := s.Port()
	for _, restart := range []struct {
		name string
		stop func()
	}{{"graceful", s.Stop}, {"kill", s.Kill}} {
		restart.stop()
		if s.Running() {
			t.Fatalf("%s: still running", restart.name)
		}
		if _, err := admin.CoreV1().Services("default").Get(ctx, "survivor", metav1.GetOptions{}); err == nil {
			t.Fatalf("%s: API answers while stopped", restart.name)
		}
		if err := s.Restart(); err != nil {
			t.Fatalf("%s: %v", restart.name, err)
		}
		if s.Port() != port {
			t.Errorf("%s: port changed from %d to %d", restart.name, port, s.Port())
		}
		got, err := admin.CoreV1().Services("default").Get(ctx, "survivor", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: after restart: %v", restart.name, err)
		}
		if got.Spec.ClusterIP != created.Spec.ClusterIP {
			t.Errorf("%s: cluster IP %s, was %s", restart.name, got.Spec.ClusterIP, created.Spec.ClusterIP)
		}
	}
}

// Two servers on one etcd do not see each other's objects.
func TestSharedEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiservers; skipped with -short")
	}
	bins := RequireBinaries(t)
	etcd, err := StartEtcd(bins.Etcd, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	ctx := context.Background()
	var servers []*Server
	for i := 0; i < 2; i++ {
		servers = append(servers, Start(t, Options{Etcd: etcd}))
	}
	a, _ := servers[0].Client(Admin)
	b, _ := servers[1].Client(Admin)
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-a"}}
	if _, err := a.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CoreV1().Namespaces().Get(ctx, "only-in-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("second server sees the first one's namespace: %v", err)
	}
}
