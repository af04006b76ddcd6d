// Package report turns the ginkgo JSON reports of several e2e runs (one per kube-proxy and
// mode) into one markdown table, spec by spec, so that a spec passing with upstream's
// kube-proxy and failing with ours stands out.
//
// It may import only the standard library.
package report
