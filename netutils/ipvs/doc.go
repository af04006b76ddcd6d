/*
Copyright The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package ipvs programs the kernel's IP Virtual Server tables over generic netlink
// (github.com/moby/ipvs).
//
// Its API matches upstream kube-proxy's pkg/proxy/ipvs/util (package name ipvs): Interface,
// VirtualServer, RealServer, the Flag constants, New. One deliberate difference: when the
// kernel has no IPVS, upstream's New returns nil (or a handle whose calls silently misbehave),
// while this New returns an Interface whose every method fails with an error wrapping
// ErrNotAvailable. NewChecked and Available report the condition up front.
//
// IPVS tables are per network namespace; a handle acts on the namespace of the thread that
// created it.
//
// Allowed imports: the standard library, github.com/moby/ipvs, github.com/vishvananda/netlink,
// golang.org/x/sys/unix, k8s.io/klog/v2. Never anything from k8s.io/kube-proxy. The fake lives
// in ipvs/testing.
package ipvs
