package app

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cidrRecordingHandler is a target that also takes the ServiceCIDRs' union, as the
// proxier does.
type cidrRecordingHandler struct{ recordingHandler }

func (r *cidrRecordingHandler) OnServiceCIDRsChanged(cidrs []string) {
	r.add("cidrs %v", cidrs)
}

func testServiceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

// The feed turns the server's ServiceCIDR objects into the union the proxier reads: a
// range two objects name survives the deletion of one, what arrived before the proxier
// existed is replayed, and a target that does not take ServiceCIDRs (a dry run's
// tracker) is not bothered.
func TestLocalNodeFeedServiceCIDRs(t *testing.T) {
	k8s := testServiceCIDR("kubernetes", "10.96.0.0/16", "fd00:96::/112")
	extra := testServiceCIDR("extra", "fd00:96::/112", "198.19.0.0/16")
	extra2 := testServiceCIDR("extra", "198.19.0.0/16")
	tests := []struct {
		name   string
		before func(f *localNodeFeed) // before attach
		after  func(f *localNodeFeed)
		want   []string
	}{
		{
			name:   "none served: an empty union once synced",
			before: func(f *localNodeFeed) { f.OnServiceCIDRsSynced() },
			want:   []string{"cidrs []"},
		},
		{
			name: "replayed, then changes",
			before: func(f *localNodeFeed) {
				f.OnServiceCIDRAdd(k8s)
				f.OnServiceCIDRsSynced()
			},
			after: func(f *localNodeFeed) {
				f.OnServiceCIDRAdd(extra)
				f.OnServiceCIDRDelete(k8s)
				f.OnServiceCIDRUpdate(extra, extra2)
			},
			want: []string{
				// What arrived before attach is handed on as the latest union, once.
				"cidrs [10.96.0.0/16 fd00:96::/112]",
				"cidrs [10.96.0.0/16 198.19.0.0/16 fd00:96::/112]",
				// fd00:96::/112 stays: extra names it too.
				"cidrs [198.19.0.0/16 fd00:96::/112]",
				"cidrs [198.19.0.0/16]",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newLocalNodeFeed("unix:///unused.sock", "node-a")
			tc.before(f)
			proxier, tracker := &cidrRecordingHandler{}, &recordingHandler{}
			f.attach(proxier, tracker)
			if tc.after != nil {
				tc.after(f)
			}
			if got, want := strings.Join(proxier.events, "\n"), strings.Join(tc.want, "\n"); got != want {
				t.Errorf("proxier got\n%s\nwant\n%s", got, want)
			}
			if len(tracker.events) != 0 {
				t.Errorf("tracker got %v, want nothing", tracker.events)
			}
		})
	}
}
