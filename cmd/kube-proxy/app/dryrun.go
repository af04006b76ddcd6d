package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// dryRunQuiet is how long the proxiers' output must stay unchanged before a dry run
// considers the first sync complete.
const dryRunQuiet = 500 * time.Millisecond

// dryRunOutput collects what each family's proxier would program.
type dryRunOutput struct {
	mu        sync.Mutex
	bufs      map[v1.IPFamily]*bytes.Buffer
	kinds     map[v1.IPFamily]string
	lastWrite time.Time
	// follow, once set, receives every write as it happens (--dry-run-follow)
	// instead of the buffers.
	follow io.Writer

	// What the informers have delivered, to say what a dry run that does not
	// finish is still waiting for.
	services, slices             int
	servicesSynced, slicesSynced bool

	// cidrsListed closes when the ServiceCIDR informer first reports; see
	// holdForServiceCIDRs. cidrsTracked says there is such an informer.
	cidrsTracked bool
	cidrsListed  chan struct{}
	cidrsOnce    sync.Once
}

func newDryRunOutput() *dryRunOutput {
	return &dryRunOutput{bufs: map[v1.IPFamily]*bytes.Buffer{}, kinds: map[v1.IPFamily]string{}, cidrsListed: make(chan struct{})}
}

type familyWriter struct {
	d      *dryRunOutput
	family v1.IPFamily
}

func (w familyWriter) Write(p []byte) (int, error) {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	w.d.lastWrite = time.Now()
	if w.d.follow != nil {
		if err := w.d.printLocked(w.d.follow, w.family, p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return w.d.bufs[w.family].Write(p)
}

// printLocked writes one family's text under its header; d.mu must be held.
func (d *dryRunOutput) printLocked(out io.Writer, family v1.IPFamily, text []byte) error {
	if _, err := fmt.Fprintf(out, "# kube-proxy --dry-run: %s, %s\n", family, d.kinds[family]); err != nil {
		return err
	}
	_, err := out.Write(text)
	return err
}

// startFollowing prints whatever was collected so far, then makes every later
// sync print as it happens. Each proxier write is one whole sync (a restore input
// or an nft transaction), so one header per write keeps the stream readable.
func (d *dryRunOutput) startFollowing(out io.Writer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, family := range d.familiesLocked() {
		if b := d.bufs[family]; b.Len() > 0 {
			if err := d.printLocked(out, family, b.Bytes()); err != nil {
				return err
			}
			b.Reset()
		}
	}
	d.follow = out
	return nil
}

func (d *dryRunOutput) familiesLocked() []v1.IPFamily {
	families := make([]v1.IPFamily, 0, len(d.bufs))
	for f := range d.bufs {
		families = append(families, f)
	}
	sort.Slice(families, func(i, j int) bool { return families[i] < families[j] })
	return families
}

// writer returns the sink for one family; kind says what the text is.
func (d *dryRunOutput) writer(family v1.IPFamily, kind string) io.Writer {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bufs[family] = &bytes.Buffer{}
	d.kinds[family] = kind
	return familyWriter{d, family}
}

// ready reports whether every family has written and nothing was written lately.
func (d *dryRunOutput) ready(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.bufs) == 0 {
		return false
	}
	for _, b := range d.bufs {
		if b.Len() == 0 {
			return false
		}
	}
	return now.Sub(d.lastWrite) >= dryRunQuiet
}

// waitAndPrint waits for the first full sync of every family, then prints it.
// It gives up when ctx ends; if that is the --dry-run-timeout, the error says
// what was still pending.
func (d *dryRunOutput) waitAndPrint(ctx context.Context, out io.Writer) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !d.ready(time.Now()) {
		select {
		case <-ctx.Done():
			if deadline := dryRunDeadlineOf(ctx); deadline != nil {
				return d.deadlineError(deadline, time.Now())
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, family := range d.familiesLocked() {
		if err := d.printLocked(out, family, d.bufs[family].Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// holdForServiceCIDRs returns a channel that closes once the ServiceCIDR informer
// has reported the cluster's ServiceCIDRs to the proxier (the informer handler tells
// d after the proxier). A dry run prints its first full sync, whose
// cluster-ips-check rules depend on those ranges, but the proxier takes new ranges
// only at its next sync, which a dry run never reaches: so the source holds back the
// Services' and EndpointSlices' "synced" signals, and with them that first sync,
// until the channel closes. A real proxier does not wait.
func (d *dryRunOutput) holdForServiceCIDRs() <-chan struct{} {
	d.mu.Lock()
	d.cidrsTracked = true
	d.mu.Unlock()
	return d.cidrsListed
}

// OnServiceCIDRsChanged is config.ServiceCIDRHandler; the ranges themselves
// are the proxier's business.
func (d *dryRunOutput) OnServiceCIDRsChanged([]string) {
	d.cidrsOnce.Do(func() { close(d.cidrsListed) })
}

func (d *dryRunOutput) OnServiceAdd(*v1.Service) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.services++
}
func (d *dryRunOutput) OnServiceUpdate(_, _ *v1.Service) {}
func (d *dryRunOutput) OnServiceDelete(*v1.Service) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.services--
}
func (d *dryRunOutput) OnServiceSynced() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.servicesSynced = true
}
func (d *dryRunOutput) OnEndpointSliceAdd(*discoveryv1.EndpointSlice) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.slices++
}
func (d *dryRunOutput) OnEndpointSliceUpdate(_, _ *discoveryv1.EndpointSlice) {}
func (d *dryRunOutput) OnEndpointSliceDelete(*discoveryv1.EndpointSlice) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.slices--
}
func (d *dryRunOutput) OnEndpointSlicesSynced() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.slicesSynced = true
}

// pending lists what keeps the dry run from printing, most upstream first.
func (d *dryRunOutput) pending(now time.Time) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var p []string
	if d.cidrsTracked {
		select {
		case <-d.cidrsListed:
		default:
			p = append(p, "ServiceCIDRs not yet listed (the first sync waits for them)")
		}
	}
	if !d.servicesSynced {
		p = append(p, fmt.Sprintf("Services not yet listed (%d received so far)", d.services))
	}
	if !d.slicesSynced {
		p = append(p, fmt.Sprintf("EndpointSlices not yet listed (%d received so far)", d.slices))
	}
	if len(d.bufs) == 0 {
		p = append(p, "no proxier has been set up")
	}
	wrote := 0
	for _, family := range d.familiesLocked() {
		if d.bufs[family].Len() == 0 {
			what := "first sync not yet written"
			if d.servicesSynced && d.slicesSynced {
				what = "first sync still running"
			}
			p = append(p, fmt.Sprintf("%s (%s): %s", family, d.kinds[family], what))
			continue
		}
		wrote++
	}
	if wrote > 0 && wrote == len(d.bufs) {
		if quiet := now.Sub(d.lastWrite); quiet < dryRunQuiet {
			p = append(p, fmt.Sprintf("output still changing (last written %v ago; printing waits for %v without a change)", quiet.Round(time.Millisecond), dryRunQuiet))
		}
	}
	if len(p) == 0 {
		p = append(p, "nothing identified (the output became complete at the deadline)")
	}
	return p
}

func (d *dryRunOutput) deadlineError(deadline *dryRunDeadline, now time.Time) error {
	return fmt.Errorf("dry run: no complete sync within %v (--dry-run-timeout); still pending: %s",
		deadline.timeout, strings.Join(d.pending(now), "; "))
}

// dryRunDeadline is the cancellation cause of a dry run that ran out of
// --dry-run-timeout, as opposed to one stopped by a signal.
type dryRunDeadline struct {
	timeout time.Duration
}

func (e *dryRunDeadline) Error() string {
	return fmt.Sprintf("dry run: gave up after %v (--dry-run-timeout)", e.timeout)
}

// dryRunDeadlineOf returns the deadline that ended ctx, or nil when ctx is live
// or ended otherwise.
func dryRunDeadlineOf(ctx context.Context) *dryRunDeadline {
	var e *dryRunDeadline
	if ctx.Err() != nil && errors.As(context.Cause(ctx), &e) {
		return e
	}
	return nil
}

// withDryRunDeadline returns a context that ends with a dryRunDeadline cause
// after timeout, and a function that disarms the deadline (for
// --dry-run-follow, which is bounded only until it starts following).
func withDryRunDeadline(ctx context.Context, timeout time.Duration) (context.Context, func(), context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(timeout, func() { cancel(&dryRunDeadline{timeout: timeout}) })
	return ctx, func() { timer.Stop() }, func() {
		timer.Stop()
		cancel(nil)
	}
}

// waitForAPIServer probes the API server until it answers. A dry run has no
// /healthz, and without this it would wait silently in the informers' own
// retries; this says why it waits, as the normal mode's probe does, and with a
// deadline ends in an error naming the server.
func waitForAPIServer(ctx context.Context, client clientset.Interface) error {
	logger := klog.FromContext(ctx)
	server := apiServerAddress(client)
	// Once out of steps, Step keeps returning the last delay (at most Cap).
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 6, Cap: 10 * time.Second}
	var lastErr error
	logged := false
	for {
		probeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := probeAPI(probeCtx, client)
		cancel()
		if err == nil {
			if lastErr != nil {
				logger.Info("API server reachable again", "server", server)
			}
			return nil
		}
		// A probe cut short by the deadline says only that; keep the last real answer.
		if lastErr == nil || ctx.Err() == nil {
			lastErr = err
		}
		if ctx.Err() != nil {
			break
		}
		if !logged {
			logged = true
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				logger.Error(err, "API server refuses kube-proxy's requests (check its RBAC binding to system:node-proxier); retrying with backoff until the dry run gives up", "server", server)
			} else {
				logger.Error(err, "API server unreachable; retrying with backoff until the dry run gives up", "server", server)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff.Step()):
		}
		if ctx.Err() != nil {
			break
		}
	}
	if deadline := dryRunDeadlineOf(ctx); deadline != nil {
		return fmt.Errorf("%w waiting for the API server at %s: %w", deadline, server, lastErr)
	}
	return ctx.Err()
}

// apiServerAddress is the scheme and host:port client talks to.
func apiServerAddress(client clientset.Interface) string {
	u := client.Discovery().RESTClient().Get().URL()
	if u == nil || u.Host == "" {
		return "(unknown address)"
	}
	return u.Scheme + "://" + u.Host
}
