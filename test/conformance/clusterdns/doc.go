// Package clusterdns is the conformance cluster's DNS: the Service records of the Kubernetes
// DNS specification (A records of ClusterIP Services, of the ready endpoints of headless
// Services, and CNAMEs of ExternalName Services) served from informers, with NXDOMAIN for
// everything else and no forwarding anywhere. It stands in for CoreDNS, which the Service
// specs need only to resolve Service names; the DNS specs themselves are skipped.
//
// It may import the standard library, golang.org/x/net/dns/dnsmessage, k8s.io/api,
// k8s.io/apimachinery and k8s.io/client-go.
package clusterdns
