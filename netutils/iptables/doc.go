// Package iptables wraps the iptables, ip6tables, *-save and *-restore binaries behind
// Interface, the API kube-proxy's iptables and ipvs proxiers program rules through.
//
// The exported API matches k8s.io/kubernetes/pkg/util/iptables (v1.37) name for name, so
// callers migrate by rewriting the import path. Additions (Features, HasRandomFully,
// Variant) live beside it and never change those signatures.
//
// The implementation execs the binaries through k8s.io/utils/exec, so tests can inject a
// fake or wrap every command (for example with "ip netns exec NAME"). A fake that keeps
// rules in memory, and a parser for iptables-save/iptables-restore data, are in the
// testing subpackage.
//
// Allowed imports: the standard library, k8s.io/api, k8s.io/apimachinery, k8s.io/klog,
// k8s.io/utils and golang.org/x/sys. Nothing from k8s.io/kube-proxy.
package iptables
