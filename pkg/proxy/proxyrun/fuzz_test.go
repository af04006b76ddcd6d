package proxyrun

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// byteReader hands out fuzz input as small choices; zeros once exhausted.
type byteReader struct {
	b []byte
}

func (r *byteReader) next(n int) int {
	if len(r.b) == 0 {
		return 0
	}
	v := int(r.b[0]) % n
	r.b = r.b[1:]
	return v
}

func (r *byteReader) pick(options ...string) string { return options[r.next(len(options))] }

// FuzzProxyState feeds arbitrary, often invalid, Services and EndpointSlices through the
// whole pipeline (source, trackers, node-local computation) in a series of updates. Every
// State handed to the backend must be programmable: valid addresses of its family, ports
// in range, sorted, with endpoints a subset of what the objects offered.
func FuzzProxyState(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("\x03\x01\x02\x00\x05\x07\x01\x01\x02\x02\x03\x03\x04\x04\x05\x05\x06\x06\x07"))
	f.Add([]byte("\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4\xf3\xf2\xf1\xf0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &byteReader{b: data}
		var states []*localnode.State
		b := backend.FullStateFunc(func(_ context.Context, s *localnode.State) error {
			states = append(states, s)
			return nil
		})
		p, err := New(b, Options{NodeName: "node-a", Families: []localnode.Family{localnode.IPv4, localnode.IPv6}})
		if err != nil {
			t.Fatal(err)
		}
		src := source.NewStatic()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _ = src.Run(ctx, p) }()
		for !p.synced() {
			// Static delivers synchronously once Run has started.
			waitSynced()
		}
		addrs := []string{"10.0.0.1", "10.0.0.2", "fd00::1", "::ffff:10.0.0.3", "300.1.1.1", "", "None", "0.0.0.0"}
		for step := 0; step < 1+r.next(4); step++ {
			for range 1 + r.next(3) {
				name := fmt.Sprintf("s%d", r.next(3))
				ips := []string{r.pick(addrs...)}
				if r.next(2) == 1 {
					ips = append(ips, r.pick(addrs...))
				}
				svc := st.Service("ns", name, ips)
				svc.Spec.Ports[0].Port = int32([]int{80, 0, -1, 70000}[r.next(4)])
				svc.Spec.Ports[0].Protocol = v1.Protocol(r.pick("TCP", "UDP", "SCTP", "ICMP"))
				switch r.next(4) {
				case 1:
					st.LoadBalancer(int32(r.next(70000)), r.pick(addrs...), r.pick(addrs...))(svc)
					if r.next(2) == 1 {
						st.ExternalLocal(int32(r.next(70000)))(svc)
					}
					svc.Spec.LoadBalancerSourceRanges = []string{r.pick("10.0.0.0/8", "fd00::/8", "bogus", "1.2.3.4/40")}
				case 2:
					st.InternalLocal()(svc)
				case 3:
					st.ClientIPAffinity(int32(r.next(100000)))(svc)
				}
				src.SetService(svc)
				if r.next(5) == 0 {
					src.DeleteService("ns", name)
				}
			}
			for range r.next(4) {
				var eps []discovery.Endpoint
				for range r.next(5) {
					ep := st.Endpoint(r.pick(addrs...), r.pick("node-a", "node-b", ""))
					switch r.next(4) {
					case 1:
						st.Terminating(r.next(2) == 1)(&ep)
					case 2:
						st.NotReady()(&ep)
					case 3:
						st.Zone(r.pick("z1", "z2"), r.next(2) == 1)(&ep)
					}
					eps = append(eps, ep)
				}
				slice := st.EndpointSlice("ns", fmt.Sprintf("s%d", r.next(3)), fmt.Sprintf("sl%d", r.next(3)), "http",
					int32([]int{8080, 0, 70000}[r.next(3)]), eps...)
				if r.next(3) == 0 {
					slice.AddressType = discovery.AddressTypeIPv6
				}
				if r.next(4) == 0 {
					slice.Ports[0].Protocol = ptr.To(v1.ProtocolUDP)
				}
				src.SetEndpointSlice(slice)
			}
			if r.next(3) == 0 {
				src.SetNode(st.Node("node-a", r.pick("z1", "z2", "")))
			}
			if err := p.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for i, s := range states {
			if err := s.Validate(); err != nil {
				t.Fatalf("state %d (%s) is not programmable: %v", i, s.Family, err)
			}
			norm := &localnode.State{Family: s.Family, Services: append([]localnode.Service(nil), s.Services...)}
			for j := range norm.Services {
				norm.Services[j].Endpoints = append([]localnode.Endpoint(nil), norm.Services[j].Endpoints...)
			}
			norm.Normalize()
			if !norm.Equal(s) {
				t.Fatalf("state %d (%s) is not in canonical order", i, s.Family)
			}
		}
	})
}
