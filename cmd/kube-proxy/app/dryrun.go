package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
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
}

func newDryRunOutput() *dryRunOutput {
	return &dryRunOutput{bufs: map[v1.IPFamily]*bytes.Buffer{}, kinds: map[v1.IPFamily]string{}}
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
func (d *dryRunOutput) waitAndPrint(ctx context.Context, out io.Writer, timeout time.Duration) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !d.ready(time.Now()) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("dry run: no complete sync within %v (are Services and EndpointSlices being listed?)", timeout)
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
