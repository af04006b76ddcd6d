package app

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// A dry run that runs out of --dry-run-timeout says what it was still waiting
// for, instead of guessing.
func TestDryRunDeadlineSaysWhatIsPending(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(d *dryRunOutput)
		// written lists the families whose first sync has been written.
		written []v1.IPFamily
		// writtenAgo is how long before the deadline the last write happened.
		writtenAgo time.Duration
		want       []string
		notWant    []string
	}{
		{
			name: "nothing listed",
			want: []string{
				"no complete sync within 3s (--dry-run-timeout)",
				"Services not yet listed (0 received so far)",
				"EndpointSlices not yet listed (0 received so far)",
				"IPv4 (nft script): first sync not yet written",
				"IPv6 (nft script): first sync not yet written",
			},
		},
		{
			name: "Services listed, EndpointSlices still coming",
			setup: func(d *dryRunOutput) {
				for range 3 {
					d.OnServiceAdd(&v1.Service{})
				}
				d.OnServiceSynced()
				d.OnEndpointSliceAdd(&discoveryv1.EndpointSlice{})
				d.OnEndpointSliceAdd(&discoveryv1.EndpointSlice{})
			},
			want:    []string{"EndpointSlices not yet listed (2 received so far)", "IPv4 (nft script): first sync not yet written"},
			notWant: []string{"Services not yet listed"},
		},
		{
			name: "everything listed, one family still syncing",
			setup: func(d *dryRunOutput) {
				d.OnServiceSynced()
				d.OnEndpointSlicesSynced()
			},
			written:    []v1.IPFamily{v1.IPv4Protocol},
			writtenAgo: time.Minute,
			want:       []string{"still pending: IPv6 (nft script): first sync still running"},
			notWant:    []string{"not yet listed", "IPv4 (nft script)", "still changing"},
		},
		{
			name: "everything written, but not yet quiet",
			setup: func(d *dryRunOutput) {
				d.OnServiceSynced()
				d.OnEndpointSlicesSynced()
			},
			written:    []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
			writtenAgo: 100 * time.Millisecond,
			want:       []string{"output still changing (last written 100ms ago"},
			notWant:    []string{"not yet listed", "first sync"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDryRunOutput()
			ws := map[v1.IPFamily]interface{ Write([]byte) (int, error) }{
				v1.IPv4Protocol: d.writer(v1.IPv4Protocol, "nft script"),
				v1.IPv6Protocol: d.writer(v1.IPv6Protocol, "nft script"),
			}
			if tc.setup != nil {
				tc.setup(d)
			}
			for _, f := range tc.written {
				if _, err := ws[f].Write([]byte("table ip kube-proxy {}\n")); err != nil {
					t.Fatal(err)
				}
			}
			now := time.Now()
			d.mu.Lock()
			d.lastWrite = now.Add(-tc.writtenAgo)
			d.mu.Unlock()

			msg := d.deadlineError(&dryRunDeadline{timeout: 3 * time.Second}, now).Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not mention %q", msg, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(msg, w) {
					t.Errorf("%q mentions %q", msg, w)
				}
			}
		})
	}
}

// waitAndPrint ends with the pending report when the deadline cancels its
// context, and with the plain context error when a signal does.
func TestDryRunWaitAndPrintEnds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cause    error
		want     string
		wantPlan bool
	}{
		{name: "deadline", cause: &dryRunDeadline{timeout: time.Second}, want: "no complete sync within 1s (--dry-run-timeout); still pending: Services not yet listed"},
		{name: "signal", want: context.Canceled.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDryRunOutput()
			d.writer(v1.IPv4Protocol, "iptables-restore input")
			ctx, cancel := context.WithCancelCause(t.Context())
			cancel(tc.cause)
			var out bytes.Buffer
			err := d.waitAndPrint(ctx, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("printed %q after giving up", out.String())
			}
		})
	}
}

// The deadline is a flag, and it bounds the whole dry run.
func TestDryRunTimeoutFlag(t *testing.T) {
	o, err := parseAndComplete(t, []string{"--dry-run", "--dry-run-timeout=90s", "--manifests=x"})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "dryRunTimeout", o.dryRunTimeout, 90*time.Second)
	if o, err = parseAndComplete(t, nil); err != nil {
		t.Fatal(err)
	}
	expect(t, "default dryRunTimeout", o.dryRunTimeout, 5*time.Minute)
	if _, err := parseAndComplete(t, []string{"--dry-run-timeout=0s"}); err == nil || !strings.Contains(err.Error(), "--dry-run-timeout") {
		t.Errorf("--dry-run-timeout=0s: error %v, want one naming the flag", err)
	}
}

// closedPort returns a local TCP address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// --dry-run against an API server that refuses connections says so while it
// retries, and gives up at --dry-run-timeout with an error naming the server.
func TestDryRunUnreachableAPIServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "dry run", args: []string{"--dry-run"}},
		{name: "dry run follow", args: []string{"--dry-run-follow"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			ctx := klog.NewContext(t.Context(), logger)
			// Far beyond the dry-run timeout: reaching it means the dry run hung.
			ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			addr := closedPort(t)
			o, err := parseAndComplete(t, append([]string{
				"--master=http://" + addr,
				"--hostname-override=node-1",
				"--dry-run-timeout=1500ms",
			}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			err = o.Run(ctx)
			if ctx.Err() != nil {
				t.Fatalf("the dry run did not give up on its own (Run returned %v only when the test's context ended)", err)
			}
			if err == nil {
				t.Fatal("no error: a dry run that never reached the API server must fail")
			}
			for _, want := range []string{"http://" + addr, "--dry-run-timeout", "1.5s", "connection refused"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			if !strings.Contains(logs, "API server unreachable; retrying") || !strings.Contains(logs, addr) {
				t.Errorf("the log does not say the API server at %s is unreachable:\n%s", addr, logs)
			}
			if n := strings.Count(logs, "API server unreachable; retrying"); n != 1 {
				t.Errorf("the retry message was logged %d times, want once", n)
			}
			var deadline *dryRunDeadline
			if !errors.As(err, &deadline) {
				t.Errorf("error %v does not wrap the dry-run deadline", err)
			}
		})
	}
}
