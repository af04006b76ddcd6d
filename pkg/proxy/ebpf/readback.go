package ebpf

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// Translation is what the maps make of one destination, read back from them: the
// answer a tracer (kube-proxy trace) gives for a socket-level Service.
type Translation struct {
	// Endpoints a new connection may be sent to, in slot order; empty with Reject
	// false means the destination is left to the nftables rules (Local policy with no
	// usable endpoint).
	Endpoints []netip.AddrPort
	// Reject: connect and sendmsg fail with ECONNREFUSED.
	Reject bool
	// AffinityTimeout is the ClientIP affinity timeout, 0 without affinity.
	AffinityTimeout time.Duration
}

// ReadMap is the part of *ebpf.Map reading back uses.
type ReadMap interface {
	Lookup(key, valueOut any) error
}

// ReadMaps are the load-balancing maps, for reading.
type ReadMaps struct {
	Frontends, Sets, Backends ReadMap
	// NotFound reports whether a Lookup error means the key is absent.
	NotFound func(error) bool
}

// Lookup returns the translation of dst for proto, or nil when the maps do not
// translate it (the socket hooks leave it alone).
func (r *ReadMaps) Lookup(dst netip.AddrPort, proto localnode.Protocol) (*Translation, error) {
	a := dst.Addr().Unmap()
	key := makeFeKey(a, dst.Port(), protoNumber(proto))
	var fv feVal
	if err := r.Frontends.Lookup(key, &fv); err != nil {
		if r.NotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading frontend %s: %w", key, err)
	}
	var sv setVal
	if err := r.Sets.Lookup(fv.SetID, &sv); err != nil {
		if r.NotFound(err) {
			// The programs skip a frontend whose set is gone.
			return nil, nil
		}
		return nil, fmt.Errorf("reading set %d of frontend %s: %w", fv.SetID, key, err)
	}
	t := &Translation{Reject: sv.Count == 0 && sv.Flags&setFlagReject != 0,
		AffinityTimeout: time.Duration(sv.AffinitySec) * time.Second}
	for i := uint32(0); i < sv.Count; i++ {
		var bv beVal
		if err := r.Backends.Lookup(beKey{SetID: fv.SetID, Slot: i}, &bv); err != nil {
			return nil, fmt.Errorf("reading slot %d of set %d (frontend %s): %w", i, fv.SetID, key, err)
		}
		t.Endpoints = append(t.Endpoints, netip.AddrPortFrom(wordsAddr(bv.Addr, key.Family), bv.Port))
	}
	return t, nil
}

var errNotFound = errors.New("key not found")
