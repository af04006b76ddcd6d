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

// Package sysctl reads and writes kernel parameters under /proc/sys.
//
// Interface has exactly the method set of k8s.io/component-helpers/node/util/sysctl.Interface,
// so values of either type can be passed where the other is expected. Names may be given in
// the slash form used by kube-proxy ("net/ipv4/ip_forward") or in the dotted form printed by
// sysctl(8) ("net.ipv4.ip_forward").
//
// Network parameters (net/...) are per network namespace: the kernel resolves them against the
// namespace of the thread that opens the file, so callers working in another namespace must
// call Interface methods from a goroutine locked to a thread in that namespace.
//
// Allowed imports: the standard library only. The fake lives in sysctl/testing.
package sysctl
