package app

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	lnclient "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
)

func TestLocalNodeSourceLimitFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    lnclient.Limits
		wantErr string
	}{
		{name: "defaults", want: lnclient.Limits{MaxPendingObjects: lnclient.DefaultMaxPendingObjects, MaxPendingBytes: lnclient.DefaultMaxPendingBytes}},
		{name: "set", args: []string{"--localnode-source-max-pending-objects=5000", "--localnode-source-max-pending-bytes=1048576"},
			want: lnclient.Limits{MaxPendingObjects: 5000, MaxPendingBytes: 1 << 20}},
		{name: "negative objects", args: []string{"--localnode-source-max-pending-objects=-1"}, wantErr: "--localnode-source-max-pending-objects -1 must not be negative"},
		{name: "negative bytes", args: []string{"--localnode-source-max-pending-bytes=-5"}, wantErr: "--localnode-source-max-pending-bytes -5 must not be negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseAndComplete(t, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.sourceLimits != tc.want {
				t.Errorf("limits %+v, want %+v", o.sourceLimits, tc.want)
			}
		})
	}
}

// neverSynced is a LocalNode server that sends a capped number of events without ever
// completing the state, then holds the stream.
type neverSynced struct {
	localnodev1.UnimplementedLocalNodeServer
}

func (neverSynced) Watch(_ *localnodev1.WatchRequest, stream localnodev1.LocalNode_WatchServer) error {
	ops := make([]*localnodev1.Op, 1000)
	for i := range ops {
		ops[i] = &localnodev1.Op{Op: &localnodev1.Op_DeleteNode{DeleteNode: &localnodev1.ObjectKey{Name: "n"}}}
	}
	for i := range 100 {
		if err := stream.Send(&localnodev1.WatchEvent{InstanceId: "hostile", Reset_: i == 0, Ops: ops}); err != nil {
			return err
		}
	}
	<-stream.Context().Done()
	return nil
}

// TestStateSocketBoundsUnsyncedState: `state --socket` against a server that never
// completes its state gives up at --max-pending-objects, naming the limit, instead of
// growing until --timeout (issue 36: it peaked at 1 GB).
func TestStateSocketBoundsUnsyncedState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hostile.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	localnodev1.RegisterLocalNodeServer(srv, neverSynced{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	_, err = runState(t, "--socket=unix://"+path, "--max-pending-objects=5000", "--timeout=20s")
	if err == nil || !strings.Contains(err.Error(), "is more than the limit MaxPendingObjects=5000") {
		t.Fatalf("err = %v, want the server cut off at MaxPendingObjects=5000", err)
	}
	if _, err := runState(t, "--socket=unix://"+path, "--max-pending-bytes=-1"); err == nil || !strings.Contains(err.Error(), "--max-pending-bytes -1 must not be negative") {
		t.Errorf("err = %v, want a negative limit refused", err)
	}
}
