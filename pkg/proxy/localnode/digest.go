package localnode

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
)

// Digest identifies a State's content: equal States have equal digests, and different
// ones, for all practical purposes, different digests. It lets a backend (or a log line)
// name a revision compactly and compare States kept elsewhere.
type Digest [sha256.Size]byte

// String returns the digest in hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// Short returns the first 12 hex digits, enough to tell revisions apart in logs.
func (d Digest) Short() string { return d.String()[:12] }

// Digest returns the digest of s. It hashes a canonical encoding, so call Normalize first
// on a State built by hand.
func (s *State) Digest() Digest {
	h := sha256.New()
	buf := make([]byte, 0, 512)
	buf = append(buf, s.Family...)
	buf = append(buf, '\n')
	for i := range s.Services {
		buf = s.Services[i].appendCanonical(buf)
		if len(buf) > 4096 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	var d Digest
	h.Sum(d[:0])
	return d
}

// Digest returns the digest of one service, for backends that key their own caches by it.
func (s *Service) Digest() Digest {
	return sha256.Sum256(s.appendCanonical(nil))
}

// appendCanonical writes every field, with separators that cannot occur inside a field
// (names are DNS labels, addresses have fixed syntax), so distinct services never encode
// alike.
func (s *Service) appendCanonical(b []byte) []byte {
	p := &s.ServicePort
	b = append(b, "svc "...)
	b = append(b, p.Name.Namespace...)
	b = append(b, '/')
	b = append(b, p.Name.Name...)
	b = append(b, ':')
	b = append(b, p.Name.Port...)
	b = append(b, '/')
	b = append(b, p.Name.Protocol...)
	b = append(b, ' ')
	b = p.ClusterIP.AppendTo(b)
	b = append(b, ' ')
	b = appendUint(b, uint64(p.Port))
	b = append(b, ' ')
	b = appendUint(b, uint64(p.NodePort))
	b = appendAddrs(append(b, " eip"...), p.ExternalIPs)
	b = appendAddrs(append(b, " lb"...), p.LoadBalancerVIPs)
	b = append(b, " src"...)
	for _, r := range p.SourceRanges {
		b = append(b, ' ')
		b = r.AppendTo(b)
	}
	b = append(b, " aff "...)
	b = append(b, p.SessionAffinity...)
	b = append(b, ' ')
	b = appendUint(b, uint64(p.AffinityTimeout))
	b = append(b, " pol "...)
	b = append(b, p.InternalPolicy...)
	b = append(b, ' ')
	b = append(b, p.ExternalPolicy...)
	b = append(b, ' ')
	b = appendUint(b, uint64(p.HealthCheckNodePort))
	if s.HasAnyEndpoints {
		b = append(b, " any"...)
	}
	b = append(b, '\n')
	for _, e := range s.Endpoints {
		b = append(b, " ep "...)
		b = e.AddrPort().AppendTo(b)
		b = append(b, ' ')
		b = appendFlags(b, e.Ready, e.Serving, e.Terminating, e.Local, e.ForCluster, e.ForLocal)
		b = append(b, ' ')
		b = append(b, e.NodeName...)
		b = append(b, ' ')
		b = append(b, e.Zone...)
		b = append(b, '\n')
	}
	return b
}

func appendAddrs(b []byte, addrs []netip.Addr) []byte {
	for _, a := range addrs {
		b = append(b, ' ')
		b = a.AppendTo(b)
	}
	return b
}

func appendFlags(b []byte, flags ...bool) []byte {
	for _, f := range flags {
		if f {
			b = append(b, '1')
		} else {
			b = append(b, '0')
		}
	}
	return b
}
