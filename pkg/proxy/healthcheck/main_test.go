package healthcheck

import (
	"os"
	"testing"

	"k8s.io/component-base/metrics/testutil"

	"k8s.io/kube-proxy/pkg/proxy/metrics"
)

func TestMain(m *testing.M) {
	// component-base metrics only count once registered.
	reg := testutil.NewFakeKubeRegistry("1.37.0")
	reg.MustRegister(metrics.ProxyHealthzTotal, metrics.ProxyLivezTotal)
	os.Exit(m.Run())
}
