package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// Printer is a backend.FullState that writes each State it is given to w. It is only
// called on real change, so every block it prints is a new revision.
type Printer struct {
	mu        sync.Mutex
	w         io.Writer
	revisions map[localnode.Family]int
}

var _ backend.FullState = &Printer{}

// NewPrinter returns a Printer writing to w.
func NewPrinter(w io.Writer) *Printer {
	return &Printer{w: w, revisions: map[localnode.Family]int{}}
}

// Sync implements backend.FullState.
func (p *Printer) Sync(_ context.Context, st *localnode.State) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.revisions[st.Family]++
	_, err := io.WriteString(p.w, Format(p.revisions[st.Family], st))
	return err
}

// Format renders one revision of st: a header line, then each service port with the
// settings that differ from the defaults, and its endpoints indented below it.
func Format(revision int, st *localnode.State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "revision %d %s digest %s services %d\n", revision, st.Family, st.Digest().Short(), len(st.Services))
	for i := range st.Services {
		svc := &st.Services[i]
		fmt.Fprintf(&b, "  %s %s", svc.Name, svc.ClusterIP)
		fmt.Fprintf(&b, ":%d", svc.Port)
		if svc.NodePort != 0 {
			fmt.Fprintf(&b, " nodePort=%d", svc.NodePort)
		}
		if len(svc.ExternalIPs) > 0 {
			fmt.Fprintf(&b, " externalIPs=%v", svc.ExternalIPs)
		}
		if len(svc.LoadBalancerVIPs) > 0 {
			fmt.Fprintf(&b, " loadBalancer=%v", svc.LoadBalancerVIPs)
		}
		if len(svc.SourceRanges) > 0 {
			fmt.Fprintf(&b, " sourceRanges=%v", svc.SourceRanges)
		}
		if svc.SessionAffinity == localnode.AffinityClientIP {
			fmt.Fprintf(&b, " affinity=ClientIP/%s", svc.AffinityTimeout)
		}
		if svc.InternalPolicy == localnode.PolicyLocal {
			b.WriteString(" internal=Local")
		}
		if svc.ExternalPolicy == localnode.PolicyLocal {
			b.WriteString(" external=Local")
		}
		if svc.HealthCheckNodePort != 0 {
			fmt.Fprintf(&b, " healthCheckNodePort=%d", svc.HealthCheckNodePort)
		}
		switch {
		case len(svc.Endpoints) == 0 && svc.HasAnyEndpoints:
			b.WriteString(" (no endpoints usable from this node: drop)")
		case len(svc.Endpoints) == 0:
			b.WriteString(" (no endpoints: reject)")
		}
		b.WriteByte('\n')
		for _, ep := range svc.Endpoints {
			fmt.Fprintf(&b, "    -> %s", ep)
			var roles []string
			if ep.ForCluster {
				roles = append(roles, "cluster")
			}
			if ep.ForLocal {
				roles = append(roles, "local")
			}
			fmt.Fprintf(&b, " for=%s", strings.Join(roles, "+"))
			if !ep.Ready {
				if ep.Terminating {
					b.WriteString(" terminating")
				} else {
					b.WriteString(" not-ready")
				}
			}
			if ep.NodeName != "" {
				fmt.Fprintf(&b, " node=%s", ep.NodeName)
			}
			if ep.Zone != "" {
				fmt.Fprintf(&b, " zone=%s", ep.Zone)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}
