// Package hcnapi is the winkernel proxier's platform-neutral view of the
// Windows Host Compute Network service: the few HNS objects the proxier reads
// and writes (networks, endpoints, load balancers), as plain Go structs with
// the same field meanings and flag values as github.com/Microsoft/hnslib/hcn,
// and the Interface over them.
//
// It exists so that everything deciding which HNS objects must exist builds
// and is tested on every platform: hnslib's hcn package is Windows-only. The
// winkernel package converts between these structs and hcn's in its
// Windows-only adapter; pkg/proxy/winkernel/testing has an in-memory fake.
//
// Allowed imports: the standard library only.
package hcnapi
