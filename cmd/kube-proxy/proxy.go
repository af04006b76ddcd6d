// Command kube-proxy is the Kubernetes network proxy: a drop-in replacement for the
// upstream v1.37 binary, built from the k8s.io/kube-proxy module, that can also run
// from manifest files without a cluster (--manifests) and print the rules it would
// program (--dry-run).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // kubernetes_build_info

	"k8s.io/kube-proxy/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
