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
	return w.d.bufs[w.family].Write(p)
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
	families := make([]string, 0, len(d.bufs))
	for f := range d.bufs {
		families = append(families, string(f))
	}
	sort.Strings(families)
	for _, f := range families {
		family := v1.IPFamily(f)
		if _, err := fmt.Fprintf(out, "# kube-proxy --dry-run: %s, %s\n", family, d.kinds[family]); err != nil {
			return err
		}
		if _, err := out.Write(d.bufs[family].Bytes()); err != nil {
			return err
		}
	}
	return nil
}
