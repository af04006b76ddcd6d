package clusterdns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/klog/v2"
)

// Records answers questions from the cluster's Services and EndpointSlices.
type Records struct {
	Domain    string // "cluster.local"
	Services  corelisters.ServiceLister
	Endpoints discoverylisters.EndpointSliceLister
}

// Answer is what one name resolves to: addresses, or a CNAME target; Found is false for
// names outside the cluster's records (NXDOMAIN).
type Answer struct {
	Found bool
	Addrs []netip.Addr
	CNAME string
}

// Lookup resolves NAME (without the trailing dot) of the form <service>.<namespace>.svc.<domain>.
func (r *Records) Lookup(name string) Answer {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	suffix := ".svc." + r.Domain
	rest, ok := strings.CutSuffix(name, suffix)
	if !ok {
		return Answer{}
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 2 {
		return Answer{}
	}
	svc, err := r.Services.Services(parts[1]).Get(parts[0])
	if err != nil {
		return Answer{}
	}
	switch {
	case svc.Spec.Type == v1.ServiceTypeExternalName:
		return Answer{Found: true, CNAME: svc.Spec.ExternalName}
	case svc.Spec.ClusterIP != v1.ClusterIPNone && svc.Spec.ClusterIP != "":
		a := Answer{Found: true}
		for _, ip := range svc.Spec.ClusterIPs {
			if addr, err := netip.ParseAddr(ip); err == nil {
				a.Addrs = append(a.Addrs, addr)
			}
		}
		return a
	}
	// Headless: every ready endpoint, as the DNS specification says.
	a := Answer{Found: true}
	slices, _ := r.Endpoints.EndpointSlices(svc.Namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name}))
	seen := map[netip.Addr]bool{}
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, ip := range ep.Addresses {
				if addr, err := netip.ParseAddr(ip); err == nil && !seen[addr] {
					seen[addr] = true
					a.Addrs = append(a.Addrs, addr)
				}
			}
		}
	}
	return a
}

// Respond builds the reply to one query message.
func (r *Records) Respond(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	hdr, err := p.Start(query)
	if err != nil {
		return nil, fmt.Errorf("parsing query: %w", err)
	}
	q, err := p.Question()
	if err != nil {
		return nil, fmt.Errorf("parsing question: %w", err)
	}
	resp := dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true, RecursionDesired: hdr.RecursionDesired}
	ans := r.Lookup(q.Name.String())
	if !ans.Found {
		resp.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), resp)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}
	if ans.CNAME != "" {
		target, err := dnsmessage.NewName(strings.TrimSuffix(ans.CNAME, ".") + ".")
		if err != nil {
			return nil, fmt.Errorf("CNAME %q: %w", ans.CNAME, err)
		}
		if err := b.CNAMEResource(rh, dnsmessage.CNAMEResource{CNAME: target}); err != nil {
			return nil, err
		}
	}
	for _, a := range ans.Addrs {
		switch {
		case a.Is4() && (q.Type == dnsmessage.TypeA || q.Type == dnsmessage.TypeALL):
			if err := b.AResource(rh, dnsmessage.AResource{A: a.As4()}); err != nil {
				return nil, err
			}
		case a.Is6() && (q.Type == dnsmessage.TypeAAAA || q.Type == dnsmessage.TypeALL):
			if err := b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()}); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}

// Serve answers UDP queries on addr until ctx ends, from informers of the client.
func Serve(ctx context.Context, client kubernetes.Interface, addr, domain string) error {
	logger := klog.FromContext(ctx)
	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	r := &Records{Domain: domain, Services: factory.Core().V1().Services().Lister(), Endpoints: factory.Discovery().V1().EndpointSlices().Lister()}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	go func() { <-ctx.Done(); conn.Close() }()
	logger.Info("Serving cluster DNS", "address", addr, "domain", domain)
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("reading from %s: %w", addr, err)
		}
		out, err := r.Respond(buf[:n])
		if err != nil {
			logger.V(2).Info("Dropping query", "from", from, "err", err)
			continue
		}
		if _, err := conn.WriteTo(out, from); err != nil {
			logger.V(2).Info("Reply failed", "to", from, "err", err)
		}
	}
}
