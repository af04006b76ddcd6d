// Package testing holds fakes and expectation types for tests of the IPVS
// proxier, as upstream's pkg/proxy/ipvs/testing: FakeNetlinkHandle, an
// in-memory NetLinkHandle, and the Expected* types.
//
// Allowed imports: the standard library, k8s.io/apimachinery, k8s.io/utils
// and k8s.io/net-utils.
package testing
