// Package app builds the kube-proxy command: flags and the configuration file
// (either config version), the client (API server, or manifest files with
// --manifests), the informers, the health and metrics servers, and the proxier of
// the chosen mode. It mirrors upstream Kubernetes v1.37's cmd/kube-proxy/app, so the
// binary is a drop-in replacement, and adds a no-cluster mode and a dry run.
//
// Allowed imports: everything in this module (the brain, the backends, the config API,
// pkg/features, pkg/proxy/manifest), k8s.io/net-utils, and the k8s.io staging
// libraries except k8s.io/apiserver. Only cmd/ imports this package.
package app
