//go:build linux

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"k8s.io/kube-proxy/test/kubeapiserver"
)

// kube-proxy's identity once deploy/ is applied.
const deployServiceAccountUser = "system:serviceaccount:kube-system:kube-proxy"

// canI asks the API server's authorizer whether the deployed ServiceAccount may do verb
// on resource.
func canI(ctx context.Context, t *testing.T, admin kubernetes.Interface, verb, group, resource string) (bool, string) {
	t.Helper()
	sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               deployServiceAccountUser,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SubjectAccessReview: %v", err)
	}
	return sar.Status.Allowed, sar.Status.Reason
}

// What kube-proxy does with the API (upstream's informers and event recorder).
var kubeProxyAccess = []struct{ verb, group, resource string }{
	{"list", "", "services"}, {"watch", "", "services"},
	{"list", "discovery.k8s.io", "endpointslices"}, {"watch", "discovery.k8s.io", "endpointslices"},
	{"get", "", "nodes"}, {"list", "", "nodes"}, {"watch", "", "nodes"},
	{"create", "events.k8s.io", "events"}, {"patch", "events.k8s.io", "events"},
}

// TestDeployAPIServer creates deploy/'s objects in kube-apiserver as they are written,
// with strict server-side field validation, checks that the binding gives the
// ServiceAccount what kube-proxy needs, and puts the DaemonSet's pod template through
// Pod admission (a server dry run, since no controller makes the pods here).
func TestDeployAPIServer(t *testing.T) {
	requireAPIServer(t)
	// A server of its own: privileged containers need --allow-privileged=true, which
	// kubeadm (and every distribution running kube-proxy as a DaemonSet) sets, and the
	// shared server leaves at its default, false.
	srv := kubeapiserver.Start(t, kubeapiserver.Options{ExtraArgs: []string{"--allow-privileged=true"}})
	ctx := ctxFor(t)
	admin, err := srv.Client(kubeapiserver.Admin)
	if err != nil {
		t.Fatal(err)
	}
	cfg := srv.RESTConfig(kubeapiserver.Admin)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	resource := func(u *unstructured.Unstructured) dynamic.ResourceInterface {
		t.Helper()
		m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			return dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		return dyn.Resource(m.Resource)
	}

	for _, a := range kubeProxyAccess {
		if ok, _ := canI(ctx, t, admin, a.verb, a.group, a.resource); ok {
			t.Fatalf("%s may %s %s before deploy/ is applied: the check below would prove nothing", deployServiceAccountUser, a.verb, a.resource)
		}
	}

	objs := deployObjects(t)
	// Strict validation is what makes "created" mean "every field was understood": show
	// that this server enforces it on a DaemonSet first.
	for _, u := range objs {
		if u.GetKind() != "DaemonSet" {
			continue
		}
		bad := u.DeepCopy()
		if err := unstructured.SetNestedField(bad.Object, true, "spec", "template", "spec", "hostNetwrk"); err != nil {
			t.Fatal(err)
		}
		_, err := resource(bad).Create(ctx, bad, metav1.CreateOptions{FieldValidation: "Strict", DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "hostNetwrk") {
			t.Fatalf("a misspelt field was not rejected by strict validation: %v", err)
		}
	}
	for _, u := range objs {
		if _, err := resource(u).Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatalf("creating %s %s from deploy/: %v", u.GetKind(), u.GetName(), err)
		}
		t.Cleanup(func() {
			if err := resource(u).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		})
	}

	// RBAC sees new bindings through an informer: allow it a moment.
	for _, a := range kubeProxyAccess {
		var reason string
		eventually(t, deployServiceAccountUser+" may "+a.verb+" "+a.resource, 10*time.Second, func() bool {
			var ok bool
			ok, reason = canI(ctx, t, admin, a.verb, a.group, a.resource)
			return ok
		}, func() string { return reason })
	}

	ds, err := admin.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Spec.UpdateStrategy.RollingUpdate == nil || ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.IntValue() != 1 {
		t.Errorf("rolling update %+v, want one node at a time", ds.Spec.UpdateStrategy)
	}
	if _, err := admin.CoreV1().ServiceAccounts("kube-system").Get(ctx, ds.Spec.Template.Spec.ServiceAccountName, metav1.GetOptions{}); err != nil {
		// The harness disables the ServiceAccount admission plugin (no controller
		// creates default accounts), so check what it would have.
		t.Errorf("the pod template's ServiceAccount: %v", err)
	}
	critical, err := admin.SchedulingV1().PriorityClasses().Get(ctx, "system-node-critical", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy-admission-check", Namespace: "kube-system", Labels: ds.Spec.Template.Labels},
		Spec:       *ds.Spec.Template.Spec.DeepCopy(),
	}
	// A DaemonSet pod is bound to its node when created.
	pod.Spec.NodeName = "deploy-test-node"
	got, err := admin.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("the DaemonSet's pod does not pass admission: %v", err)
	}
	// The Priority admission plugin resolved the class: admission ran on this pod.
	if got.Spec.Priority == nil || *got.Spec.Priority != critical.Value {
		t.Errorf("admitted pod has priority %v, want system-node-critical's %d", got.Spec.Priority, critical.Value)
	}
}
