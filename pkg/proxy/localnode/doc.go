// Package localnode is the node-local view of Kubernetes services that a service proxy
// programs: for one node and one IP family, every service port with the endpoints this node
// may send its traffic to.
//
// The types are plain Go values (netip addresses, strings, bools) so a backend, or a test,
// can build them by hand without Kubernetes API objects. Compute and Computer derive them
// from the brain's ServicePortMap and EndpointsMap; the choice of endpoints (topology hints,
// internal and external traffic policy, falling back to serving-terminating endpoints) is
// made by proxy.CategorizeEndpoints, so a library backend sends traffic exactly where the
// built-in proxiers would.
//
// Every built-in proxier consumes this model too: a sync shell tells it which service ports
// changed and it converts only those with Computer.ComputeServicePort, so a partial sync costs
// what the change costs (ComputeResolved builds a whole State, which is O(services) even when
// one port changed). Service.RuleOrder lists a port's endpoints in the order upstream's rules
// do, split once into the cluster and local lists, and Service.InternalNoEndpoints and
// ExternalNoEndpoints give the brain's reject/drop decision for traffic without an endpoint,
// so no backend re-sorts endpoints or re-decides policy.
//
// A State is canonical: services are sorted by name and endpoints by address, so two States
// describing the same thing are Equal and have the same Digest.
//
// Allowed imports: the brain (k8s.io/kube-proxy/pkg/proxy), the standard library and
// k8s.io/{api,apimachinery,klog}. No backend.
package localnode
