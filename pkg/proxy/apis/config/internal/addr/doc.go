// Package addr holds the address helpers that the defaulting code of every config
// version shares, so that v1alpha1 and v1alpha2 default the server addresses the
// same way.
//
// Hosts are returned bare (no brackets); ServerAddress adds them.
//
// Allowed imports: the standard library and k8s.io/utils/net.
package addr
