//go:build linux

package ebpf

import (
	"context"
	"net/netip"
	"testing"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// TestKernelNoSCTPEntries: beside TCP and UDP Services, SCTP ones (ClusterIP and
// NodePort, both families) leave no frontend in the real maps, and no set or slot
// beyond the TCP and UDP Services' own.
func TestKernelNoSCTPEntries(t *testing.T) {
	cg, pin := hostSetup(t)
	dp, err := Open(Config{CgroupPath: cg, PinPath: pin})
	if err != nil {
		t.Fatalf("opening the datapath: %v", err)
	}
	t.Cleanup(func() {
		_ = dp.Close()
		if err := Cleanup(pin); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	d := backend.NewDiffer(NewBackend(dp.Maps(), []netip.Addr{netip.MustParseAddr(nodeIPv4), netip.MustParseAddr("fd00::10")}, dp.Adopted))
	withNodePort := func(s localnode.Service) localnode.Service { s.NodePort = 30132; return s }
	for _, st := range []*localnode.State{
		{Family: localnode.IPv4, Services: []localnode.Service{
			svc("web", localnode.TCP, "10.96.0.10", 80, v4Backends...),
			svc("dns", localnode.UDP, "10.96.0.53", 53, v4Backends[0]),
			withNodePort(svc("sig", localnode.SCTP, "10.96.0.54", 9000, v4Backends...)),
			svc("sig-none", localnode.SCTP, "10.96.0.55", 9000),
		}},
		{Family: localnode.IPv6, Services: []localnode.Service{
			withNodePort(svc("sig6", localnode.SCTP, "fd00:96::54", 9000, v6Backends...)),
		}},
	} {
		st.Normalize()
		if err := d.Sync(context.Background(), st); err != nil {
			t.Fatal(err)
		}
	}
	var k feKey
	var v feVal
	frontends := map[string]bool{}
	it := dp.objs.Frontends.Iterate()
	for it.Next(&k, &v) {
		frontends[k.String()] = true
		if k.Proto == protoSCTP {
			t.Errorf("SCTP frontend %s in the maps", k)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(frontends) != 2 || !frontends["10.96.0.10:80/6"] || !frontends["10.96.0.53:53/17"] {
		t.Errorf("frontends %v, want only the TCP and UDP Services'", frontends)
	}
	var id uint32
	var sv setVal
	sets := 0
	sit := dp.objs.Sets.Iterate()
	for sit.Next(&id, &sv) {
		sets++
	}
	if err := sit.Err(); err != nil {
		t.Fatal(err)
	}
	if sets != 2 {
		t.Errorf("%d sets in the maps, want 2 (the TCP and UDP Services')", sets)
	}
}
