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

// Package conntrack lists and deletes Linux connection-tracking entries over netlink
// (github.com/vishvananda/netlink).
//
// Interface is the method set of upstream kube-proxy's pkg/proxy/conntrack.Interface, which
// k8s.io/kube-proxy/pkg/proxy/conntrack aliases. Beside it the package offers
//   - Filter, a declarative match on protocol, original destination, reply source and whether
//     the flow was DNATed, usable with Select and DeleteFiltered over any Interface;
//   - FlowSet, the exact-flow matcher DeleteEntries uses to delete a large batch with one
//     table dump (small batches are deleted entry by entry: get, check both tuples, delete by
//     conntrack id, which costs nothing proportional to the table's size);
//   - Count, and NewInNamespace to operate on another network namespace without moving threads.
//
// Allowed imports: the standard library, github.com/vishvananda/netlink (and its nl) and netns,
// golang.org/x/sys/unix, k8s.io/klog/v2. Never anything from k8s.io/kube-proxy. The fake lives in
// conntrack/testing.
package conntrack
