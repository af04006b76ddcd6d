// Package pki writes the certificates, keys and kubeconfigs of the one-node conformance
// cluster (what kubeadm's "certs" and "kubeconfig" phases produce, reduced to one node): a
// cluster CA, the API server's serving certificate, the service-account signing key and
// one client certificate per component, named the way the API server's authorizers expect.
//
// It may import only the standard library.
package pki
