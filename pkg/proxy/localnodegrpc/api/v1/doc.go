// Package localnodev1 is version 1 of the wire schema of the node-local model: the
// protobuf messages and gRPC service (localnode.proto, with the code protoc generates from
// it beside it) through which a kube-proxy serves what a node must program to backends in
// other processes and languages, and conversions between those messages and the Go types
// of k8s.io/kube-proxy/pkg/proxy/localnode and of the Kubernetes API.
//
// The schema lives in pkg/proxy/localnodegrpc with the server and client that speak it,
// above the library's run loop (proxyrun) that the server drives: the node-local model in
// pkg/proxy/localnode stays free of gRPC and of every layer above it. Versions sit side by
// side (v1, later v2). The .proto file is the contract for other languages;
// docs/versioning.md states its compatibility rules.
//
// Decoders (the *ToLocal and *ToAPI functions) validate what they read and return an
// error naming the field and the bad value; they never panic on any input.
//
// Regenerate with hack/update-proto.sh; never edit *.pb.go by hand.
//
// Allowed imports: pkg/proxy/localnode, the standard library, k8s.io/{api,apimachinery}
// and google.golang.org/{protobuf,grpc}.
package localnodev1
