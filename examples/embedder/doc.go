// Command embedder shows how a program embeds kube-proxy's nftables proxier
// the way projects such as Calico embed upstream's: it builds the proxier with
// options instead of touching the host (its own knftables.Interface, a fake
// conntrack table and health server), feeds it Services and EndpointSlices
// through the Provider handlers, waits for each sync with the sync hook
// instead of sleeping, runs the context-aware loop, and prints the ruleset it
// ended with.
//
// It needs no privileges: the ruleset lives in a knftables.Fake.
//
//	go run ./examples/embedder
//
// It imports the nftables backend, the brain and the shell; nothing else of
// this repository.
package main
