// Package pki writes the certificates, keys and kubeconfigs of the conformance cluster (what
// kubeadm's "certs" and "kubeconfig" phases produce, reduced to a control plane and a few
// kubelets): a cluster CA, the API server's serving certificate, the service-account signing
// key, one client certificate per component, and a serving certificate and kubeconfig per
// node, named the way the API server's authorizers expect.
//
// It may import only the standard library.
package pki
