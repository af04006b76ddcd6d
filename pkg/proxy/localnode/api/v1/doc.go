// Package localnodev1 is version 1 of the wire schema of the node-local model: the
// protobuf messages and gRPC service (localnode.proto, with the code protoc generates from
// it beside it) through which a kube-proxy serves what a node must program to backends in
// other processes and languages, and conversions between those messages and the Go types
// of k8s.io/kube-proxy/pkg/proxy/localnode and of the Kubernetes API.
//
// The schema lives under pkg/proxy/localnode, next to the model it mirrors, rather than
// in a top-level api/ directory: it is one more view of that package's types, versioned
// by its own directory (v1, later v2 beside it), and keeping it in the library tree lets
// the import-boundary check treat it as library code. The .proto file is the contract
// for other languages; docs/versioning.md states its compatibility rules.
//
// Decoders (the *ToLocal and *ToAPI functions) validate what they read and return an
// error naming the field and the bad value; they never panic on any input.
//
// Regenerate with hack/update-proto.sh; never edit *.pb.go by hand.
//
// Allowed imports: pkg/proxy/localnode, the standard library, k8s.io/{api,apimachinery}
// and google.golang.org/{protobuf,grpc}.
package localnodev1
