// Package testing provides fakes for pkg/proxy/util interfaces, for use in
// tests of packages that take a util.NetworkInterfacer.
//
// Allowed imports: the standard library only.
package testing
