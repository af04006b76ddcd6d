// Package app builds the kube-proxy command: flags and the configuration file
// (either config version), the client (API server, or manifest files with
// --manifests), the informers, the health and metrics servers, and the proxier of
// the chosen mode. It mirrors upstream Kubernetes v1.37's cmd/kube-proxy/app, so the
// binary is a drop-in replacement, and adds a no-cluster mode and a dry run.
//
// server.go is the run sequence (newProxyServer, then Run); client.go connects to the
// API server or the manifests; families.go decides the node's IP per family and whether
// it proxies one family or both; serve.go serves metrics and health; proxier.go builds
// one proxier per family (node IP, local-traffic detector, dry-run sink) and a
// metaproxier over two. A proxy mode is one file that registers, in proxierModes, its
// constructor for one IP family (mode_iptables_linux.go, mode_nftables_linux.go).
// Informers use pkg/proxy/source's InformerFactories, so the binary and the library
// select the same objects.
//
// Windows has one mode, kernelspace (pkg/proxy/winkernel), and its own flags. Its
// decisions live in untagged files tested on every platform (winflags.go: flags and
// defaults; kernelspace.go: families, constructor, --cleanup; winservice.go: the
// --windows-service stop sequence); the windows-tagged files (server_windows.go,
// mode_kernelspace_windows.go, service_windows.go) only connect them to winkernel and
// to the service control manager.
//
// Allowed imports: everything in this module (the brain, the backends, the config API,
// pkg/features, pkg/proxy/source/manifests), k8s.io/net-utils, and the k8s.io staging
// libraries except k8s.io/apiserver. Only cmd/ imports this package.
package app
