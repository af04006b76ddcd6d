package manifests

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// Write-then-rename, as editors do, so a reader never sees half a file.
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func svcYAML(name, ip string, port int) string {
	return "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + name + "\nspec:\n  clusterIP: " + ip +
		"\n  ports:\n  - port: " + strconv.Itoa(port) + "\n"
}

func serviceNames(t *testing.T, s *Reader) []string {
	t.Helper()
	list, err := s.Client().CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, svc := range list.Items {
		names = append(names, svc.Namespace+"/"+svc.Name+"="+svc.Spec.ClusterIP)
	}
	sort.Strings(names)
	return names
}

func TestSourceSync(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	b := filepath.Join(dir, "sub", "b.yml")

	type step struct {
		name   string
		change func()
		want   []string
		result Result
	}
	steps := []step{
		{
			name: "initial load of a directory tree, ignoring hidden and non-manifest files",
			change: func() {
				writeFile(t, a, svcYAML("a", "10.96.0.1", 80))
				writeFile(t, b, svcYAML("b", "10.96.0.2", 80))
				writeFile(t, filepath.Join(dir, ".hidden.yaml"), svcYAML("h", "10.96.0.3", 80))
				writeFile(t, filepath.Join(dir, "notes.txt"), "not a manifest")
			},
			want:   []string{"default/a=10.96.0.1", "default/b=10.96.0.2"},
			result: Result{Created: 2},
		},
		{
			name:   "no change writes nothing",
			change: func() {},
			want:   []string{"default/a=10.96.0.1", "default/b=10.96.0.2"},
			result: Result{Unchanged: 2},
		},
		{
			name:   "edit updates",
			change: func() { writeFile(t, a, svcYAML("a", "10.96.0.11", 80)) },
			want:   []string{"default/a=10.96.0.11", "default/b=10.96.0.2"},
			result: Result{Updated: 1, Unchanged: 1},
		},
		{
			name: "a broken document next to a good one: the good one applies, the vanished object is kept",
			change: func() {
				writeFile(t, a, "apiVersion: v1\nkind: Service\nmetadata: {name: a2}\nspec: {clusterIP: 10.96.0.12, ports: [{port: 80}]}\n---\nkind: [\n")
			},
			want:   []string{"default/a2=10.96.0.12", "default/a=10.96.0.11", "default/b=10.96.0.2"},
			result: Result{Created: 1, Unchanged: 1, Kept: 1},
		},
		{
			name:   "fixing the file deletes what it no longer holds",
			change: func() { writeFile(t, a, svcYAML("a2", "10.96.0.12", 80)) },
			want:   []string{"default/a2=10.96.0.12", "default/b=10.96.0.2"},
			result: Result{Deleted: 1, Unchanged: 2},
		},
		{
			name: "a duplicate in another file is rejected, the first stays",
			change: func() {
				writeFile(t, b, svcYAML("b", "10.96.0.2", 80)+"---\n"+svcYAML("a2", "10.96.0.99", 80))
			},
			want:   []string{"default/a2=10.96.0.12", "default/b=10.96.0.2"},
			result: Result{Unchanged: 2},
		},
		{
			name:   "removing a file deletes its objects",
			change: func() { _ = os.Remove(b) },
			want:   []string{"default/a2=10.96.0.12"},
			result: Result{Deleted: 1, Unchanged: 1},
		},
	}
	s := NewReader(dir)
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.change()
			res, err := s.Sync(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := serviceNames(t, s)
			if strings.Join(got, ",") != strings.Join(st.want, ",") {
				t.Errorf("services = %v, want %v", got, st.want)
			}
			type counts struct{ c, u, d, n, k int }
			if (counts{res.Created, res.Updated, res.Deleted, res.Unchanged, res.Kept}) !=
				(counts{st.result.Created, st.result.Updated, st.result.Deleted, st.result.Unchanged, st.result.Kept}) {
				t.Errorf("result = %+v, want %+v", res, st.result)
			}
		})
	}
}

func TestSourceMissingPath(t *testing.T) {
	s := NewReader(filepath.Join(t.TempDir(), "nope"))
	if _, err := s.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err = %v, want one naming the path", err)
	}
	if err := s.Run(context.Background(), time.Second); err == nil {
		t.Fatal("Run on a missing path must fail")
	}
}

// kube-proxy's informers use label and field selectors; the source's clientset must
// apply them to lists and to watch events, including objects moving in and out.
func TestSourceInformersHonourSelectors(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dir := t.TempDir()
	f := filepath.Join(dir, "m.yaml")
	nodes := "apiVersion: v1\nkind: Node\nmetadata: {name: me}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: other}\n"
	proxied := svcYAML("p", "10.96.0.1", 80)
	headless := "apiVersion: v1\nkind: Service\nmetadata: {name: h}\nspec: {clusterIP: None}\n"
	labelled := "apiVersion: v1\nkind: Service\nmetadata: {name: l, labels: {service.kubernetes.io/service-proxy-name: other}}\nspec: {clusterIP: 10.96.0.5, ports: [{port: 80}]}\n"
	writeFile(t, f, nodes+"---\n"+proxied+"---\n"+headless+"---\n"+labelled)

	s := NewReader(dir)
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	noProxyName, _ := labels.NewRequirement("service.kubernetes.io/service-proxy-name", selection.DoesNotExist, nil)
	svcFactory := informers.NewSharedInformerFactoryWithOptions(s.Client(), 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.NewSelector().Add(*noProxyName).String()
			o.FieldSelector = fields.OneTermNotEqualSelector("spec.clusterIP", v1.ClusterIPNone).String()
		}))
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(s.Client(), 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", "me").String()
		}))
	svcInformer := svcFactory.Core().V1().Services().Informer()
	nodeInformer := nodeFactory.Core().V1().Nodes().Informer()
	svcFactory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), svcInformer.HasSynced, nodeInformer.HasSynced) {
		t.Fatal("caches did not sync")
	}
	keys := func(store cache.Store) string {
		k := store.ListKeys()
		sort.Strings(k)
		return strings.Join(k, ",")
	}
	waitFor := func(what string, store cache.Store, want string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return keys(store) == want, nil
		})
		if err != nil {
			t.Fatalf("%s = %q, want %q", what, keys(store), want)
		}
	}
	waitFor("services", svcInformer.GetStore(), "default/p")
	waitFor("nodes", nodeInformer.GetStore(), "me")

	// Through watches now: add a proxied service, make one headless (drops out), change
	// the other node (never seen) and label the proxied one away.
	writeFile(t, f, strings.Join([]string{
		"apiVersion: v1\nkind: Node\nmetadata: {name: me}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: other, labels: {x: y}}\n",
		svcYAML("p", "10.96.0.1", 80),
		svcYAML("q", "10.96.0.2", 80),
		headless, labelled,
	}, "---\n"))
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor("services after add", svcInformer.GetStore(), "default/p,default/q")
	writeFile(t, f, strings.Join([]string{
		nodes,
		"apiVersion: v1\nkind: Service\nmetadata: {name: p, labels: {service.kubernetes.io/service-proxy-name: x}}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}\n",
		svcYAML("q", "10.96.0.2", 80),
		"apiVersion: v1\nkind: Service\nmetadata: {name: l}\nspec: {clusterIP: 10.96.0.5, ports: [{port: 80}]}\n",
	}, "---\n"))
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor("services after relabel", svcInformer.GetStore(), "default/l,default/q")
	waitFor("nodes at the end", nodeInformer.GetStore(), "me")
}

// Many writes at once must not overflow the fake tracker's bounded watch channels.
func TestSourceManyObjects(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dir := t.TempDir()
	s := NewReader(dir)
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(s.Client(), 0)
	inf := factory.Core().V1().Services().Informer()
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)

	var b strings.Builder
	const n = 600
	for i := range n {
		b.WriteString(svcYAML("s"+strconv.Itoa(i), "10.96."+strconv.Itoa(i/250)+"."+strconv.Itoa(i%250+1), 80))
		b.WriteString("---\n")
	}
	writeFile(t, filepath.Join(dir, "many.yaml"), b.String())
	res, err := s.Sync(ctx)
	if err != nil || res.Created != n {
		t.Fatalf("sync: %+v, %v", res, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(inf.GetStore().ListKeys()) == n, nil
	})
	if err != nil {
		t.Fatalf("informer has %d services, want %d", len(inf.GetStore().ListKeys()), n)
	}
}

// Run picks up file changes by itself.
func TestSourceRunFollowsFiles(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	dir := t.TempDir()
	f := filepath.Join(dir, "one.yaml")
	writeFile(t, f, svcYAML("a", "10.96.0.1", 80))
	s := NewReader(f)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, time.Hour) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	poll := func(want string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return strings.Join(serviceNames(t, s), ",") == want, nil
		})
		if err != nil {
			t.Fatalf("services = %v, want %s", serviceNames(t, s), want)
		}
	}
	poll("default/a=10.96.0.1")
	// The rescan period is an hour, so only fsnotify can deliver this.
	writeFile(t, f, svcYAML("a", "10.96.0.7", 80))
	poll("default/a=10.96.0.7")
}
