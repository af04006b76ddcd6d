// Package nfacct is a minimal client for the kernel's extended accounting
// objects (nfnetlink_acct), which the iptables proxier uses as named packet
// counters ("-m nfacct --nfacct-name X") that the metrics package exports.
//
// It talks netlink directly through github.com/vishvananda/netlink/nl, so
// no nfacct binary is needed. It may import the standard library,
// golang.org/x/sys, github.com/vishvananda/{netlink,netns}, client-go's retry
// helper and pkg/proxy/util; nothing from a backend or k8s.io/kubernetes.
package nfacct
