// Package runner provides BoundedFrequencyRunner, which calls a proxier's
// sync function on demand while keeping a minimum gap between calls, a
// maximum gap (periodic resync) and a quicker retry after failures.
//
// It is a brain package: it imports only the standard library,
// k8s.io/apimachinery, k8s.io/klog and k8s.io/utils/clock.
package runner
