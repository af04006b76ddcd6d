//go:build tools

// Package netutils pins the modules this module's packages need, so `go mod tidy` keeps
// them before every importer exists. Removed once the packages import them.
package netutils

import (
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/moby/ipvs"
	_ "github.com/vishvananda/netlink"
	_ "github.com/vishvananda/netns"
	_ "golang.org/x/sys/unix"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/util/sets"
	_ "k8s.io/apimachinery/pkg/util/version"
	_ "k8s.io/apimachinery/pkg/util/wait"
	_ "k8s.io/klog/v2"
	_ "k8s.io/utils/exec"
	_ "k8s.io/utils/exec/testing"
	_ "k8s.io/utils/net"
	_ "k8s.io/utils/ptr"
)
