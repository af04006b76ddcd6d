// Package kernel reports the running Linux kernel's version and names the
// minimum versions kube-proxy's backends depend on.
//
// Allowed imports: the standard library and k8s.io/apimachinery.
package kernel
