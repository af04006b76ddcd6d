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

// Package ipset manages Linux IP sets through the ipset(8) binary.
//
// Its API matches upstream kube-proxy's pkg/proxy/ipvs/ipset (Interface, IPSet, Entry, the Type
// and protocol constants, New, IsNotFoundError), so the IPVS proxier can switch imports
// unchanged. Beside it, Batch and Restorer apply many changes with a single "ipset restore"
// process instead of one process per entry.
//
// IP sets are per network namespace; the binary acts on the namespace of the thread that
// starts it.
//
// Allowed imports: the standard library, k8s.io/utils/{exec,net}, k8s.io/klog/v2. Never
// anything from k8s.io/kube-proxy. The fake lives in ipset/testing.
package ipset
