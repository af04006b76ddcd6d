package app

import (
	"os"
	"testing"
)

// kubeProxyHelperEnv, set to "1" in a child's environment, makes the test binary
// run as kube-proxy (see TestKubeProxyHelperProcess).
const kubeProxyHelperEnv = "KUBE_PROXY_TEST_HELPER"

// TestKubeProxyHelperProcess is kube-proxy's main when a test starts the test binary
// as a child with kubeProxyHelperEnv=1 and "-test.run=^TestKubeProxyHelperProcess$ --
// <kube-proxy flags>", so that tests can run the real command in another network
// namespace and kill it; otherwise it does nothing.
func TestKubeProxyHelperProcess(t *testing.T) {
	if os.Getenv(kubeProxyHelperEnv) != "1" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	cmd := NewProxyCommand()
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}
