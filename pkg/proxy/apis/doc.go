// Package apis holds well-known labels that kube-proxy interprets on API
// objects. It exists so that both kube-proxy and other service proxies can
// name those labels without importing any proxy machinery.
//
// Allowed imports: the standard library only.
package apis
