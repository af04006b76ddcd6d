package source

import (
	"k8s.io/kube-proxy/pkg/proxy/config"
)

// NodeHandler is implemented by a Handler that also wants this node's Node object, as
// kube-proxy's NodeManager does: the health server's /healthz answers 503 until the Node
// is known, and again once it is being deleted or tainted for removal. Every source of
// this package delivers the Node to a Handler that implements NodeHandler:
// OnNodeChange when it appears or changes, OnNodeDelete when it goes, and OnNodeSynced
// once the initial Node (if any) has been delivered. proxyrun.Proxy implements it and
// passes the Node on to proxyrun.Options.Node.
//
// It is an optional interface, not part of Handler, so that Handlers written before it
// existed keep compiling.
type NodeHandler = config.NodeHandler
