package manifests

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// selectingClientset wraps client-go's fake clientset so that lists and watches honour
// label and field selectors the way an API server does. The stock fake filters lists by
// label only and never filters watches, which would feed kube-proxy's single-node
// informer every Node in the manifests.
type selectingClientset struct {
	*fake.Clientset

	mu       sync.Mutex
	watchers map[*selectingWatch]struct{}
}

func newSelectingClientset() *selectingClientset {
	// NewSimpleClientset rather than NewClientset: field management is of no use here,
	// and its type conversions make every write about a hundred times slower, which
	// matters when a directory of thousands of objects is loaded.
	//nolint:staticcheck // SA1019: deliberate, see above.
	c := &selectingClientset{Clientset: fake.NewSimpleClientset(), watchers: map[*selectingWatch]struct{}{}}
	c.PrependReactor("list", "*", c.list)
	c.PrependWatchReactor("*", c.watch)
	return c
}

func (c *selectingClientset) list(action clienttesting.Action) (bool, runtime.Object, error) {
	la, ok := action.(clienttesting.ListActionImpl)
	if !ok {
		return false, nil, nil
	}
	obj, err := c.Tracker().List(la.GetResource(), la.GetKind(), la.GetNamespace(), la.ListOptions)
	if err != nil {
		return true, nil, err
	}
	r := la.GetListRestrictions()
	items, err := meta.ExtractList(obj)
	if err != nil {
		return true, nil, err
	}
	kept := items[:0]
	for _, item := range items {
		if matches(item, r.Labels, r.Fields) {
			kept = append(kept, item)
		}
	}
	if err := meta.SetList(obj, kept); err != nil {
		return true, nil, err
	}
	return true, obj, nil
}

func (c *selectingClientset) watch(action clienttesting.Action) (bool, watch.Interface, error) {
	wa, ok := action.(clienttesting.WatchActionImpl)
	if !ok {
		return false, nil, nil
	}
	inner, err := c.Tracker().Watch(wa.GetResource(), wa.GetNamespace(), wa.ListOptions)
	if err != nil {
		return true, nil, err
	}
	r := wa.GetWatchRestrictions()
	// The client listed before watching; what that list returned counts as selected,
	// so a later modification that moves an object out is delivered as a deletion.
	seed := map[string]bool{}
	for gvk, info := range supportedKinds {
		if info.gvr != wa.GetResource() {
			continue
		}
		if list, err := c.Tracker().List(info.gvr, gvk, wa.GetNamespace()); err == nil {
			items, _ := meta.ExtractList(list)
			for _, item := range items {
				if matches(item, r.Labels, r.Fields) {
					seed[objectKey(item)] = true
				}
			}
		}
	}
	w := newSelectingWatch(inner, r.Labels, r.Fields, seed, func(w *selectingWatch) {
		c.mu.Lock()
		delete(c.watchers, w)
		c.mu.Unlock()
	})
	c.mu.Lock()
	c.watchers[w] = struct{}{}
	c.mu.Unlock()
	return true, w, nil
}

// waitDrained waits until every watcher has taken all events out of the tracker's
// fixed-size channels. The tracker panics when one of those fills up, so the source
// pauses for this between batches of writes.
func (c *selectingClientset) waitDrained(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		busy := false
		c.mu.Lock()
		for w := range c.watchers {
			if len(w.inner.ResultChan()) > 0 {
				busy = true
				break
			}
		}
		c.mu.Unlock()
		if !busy {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// objectFields are the field-selector fields an API server offers for the kinds
// kube-proxy watches.
func objectFields(obj runtime.Object) fields.Set {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	set := fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}
	if svc, ok := obj.(*v1.Service); ok {
		set["spec.clusterIP"] = svc.Spec.ClusterIP
		set["spec.type"] = string(svc.Spec.Type)
	}
	return set
}

func matches(obj runtime.Object, l labels.Selector, f fields.Selector) bool {
	if l != nil && !l.Empty() {
		m, err := meta.Accessor(obj)
		if err != nil || !l.Matches(labels.Set(m.GetLabels())) {
			return false
		}
	}
	if f != nil && !f.Empty() && !f.Matches(objectFields(obj)) {
		return false
	}
	return true
}

// selectingWatch filters a watch by selectors, turning a modification that moves an
// object into or out of the selection into an Added or Deleted event, and queues
// without bound so the tracker's channel is always drained promptly.
type selectingWatch struct {
	inner  watch.Interface
	labels labels.Selector
	fields fields.Selector
	out    chan watch.Event
	stop   chan struct{}
	once   sync.Once
	onStop func(*selectingWatch)
}

func newSelectingWatch(inner watch.Interface, l labels.Selector, f fields.Selector, seed map[string]bool, onStop func(*selectingWatch)) *selectingWatch {
	w := &selectingWatch{inner: inner, labels: l, fields: f, out: make(chan watch.Event), stop: make(chan struct{}), onStop: onStop}
	go w.loop(seed)
	return w
}

func (w *selectingWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *selectingWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
		w.onStop(w)
	})
}

func objectKey(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetNamespace() + "/" + m.GetName()
}

func (w *selectingWatch) loop(selected map[string]bool) {
	defer close(w.out)
	var queue []watch.Event
	in := w.inner.ResultChan()
	for {
		var send chan watch.Event
		var next watch.Event
		if len(queue) > 0 {
			send, next = w.out, queue[0]
		} else if in == nil {
			return
		}
		select {
		case <-w.stop:
			return
		case send <- next:
			queue = queue[1:]
		case ev, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			if ev.Type == watch.Error || ev.Type == watch.Bookmark {
				queue = append(queue, ev)
				continue
			}
			key := objectKey(ev.Object)
			was := selected[key]
			now := ev.Type != watch.Deleted && matches(ev.Object, w.labels, w.fields)
			switch {
			case ev.Type == watch.Deleted && was:
				queue = append(queue, ev)
			case now && !was:
				queue = append(queue, watch.Event{Type: watch.Added, Object: ev.Object})
			case now && was:
				queue = append(queue, watch.Event{Type: watch.Modified, Object: ev.Object})
			case !now && was:
				queue = append(queue, watch.Event{Type: watch.Deleted, Object: ev.Object})
			}
			if now {
				selected[key] = true
			} else {
				delete(selected, key)
			}
		}
	}
}
