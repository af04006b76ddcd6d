package app

// HTTP serving: the metrics server (metrics, /healthz, /healthz/apiserver with the API-server probe,
// /configz, /flagz, /proxyMode, optional pprof) and the proxier health server. Both
// come up with retries every 5s, or, with bindAddressHardFail, report their first
// failure so Run can exit.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/component-base/configz"
	"k8s.io/component-base/logs"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/prometheus/slis"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/kube-proxy/pkg/features"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	v1alpha1conversion "k8s.io/kube-proxy/pkg/proxy/apis/config/v1alpha1"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
)

// startMetricsServer serves metricsBindAddress and, when there is an API server, probes
// it for the metrics server's /healthz/apiserver. With bindAddressHardFail a bind failure is
// reported on s.metricsErrCh.
func (s *ProxyServer) startMetricsServer(ctx context.Context) {
	if s.Config.BindAddressHardFail {
		s.metricsErrCh = make(chan error, 1)
	}
	if s.apiHealth != nil {
		go s.apiHealth.run(ctx, s.Client)
	}
	serveMetrics(ctx, s.Config.MetricsBindAddress, s.Config.Mode, s.Config.EnableProfiling, s.flags, s.apiHealth, s.metricsErrCh)
}

// startHealthzServer serves the proxier health server, if there is one. The returned
// channel (nil unless bindAddressHardFail) reports its failure.
func (s *ProxyServer) startHealthzServer(ctx context.Context) chan error {
	var errCh chan error
	if s.Config.BindAddressHardFail {
		errCh = make(chan error, 1)
	}
	serveHealthz(ctx, s.HealthzServer, errCh)
	return errCh
}

// setConfigz publishes the configuration, as v1alpha1 like upstream, on /configz.
func setConfigz(cfg *kubeproxyconfig.KubeProxyConfiguration) error {
	external := &configv1alpha1.KubeProxyConfiguration{}
	if err := v1alpha1conversion.Convert_config_KubeProxyConfiguration_To_v1alpha1_KubeProxyConfiguration(cfg, external, nil); err != nil {
		return fmt.Errorf("unable to convert configz: %w", err)
	}
	external.SetGroupVersionKind(configv1alpha1.SchemeGroupVersion.WithKind("KubeProxyConfiguration"))
	// Re-registering (tests build several servers in one process) replaces the entry.
	configz.Delete(kubeproxyconfig.GroupName)
	cz, err := configz.New(kubeproxyconfig.GroupName)
	if err != nil {
		return fmt.Errorf("unable to register configz: %w", err)
	}
	if err := cz.Set(external); err != nil {
		return fmt.Errorf("unable to set configz: %w", err)
	}
	return nil
}

// apiHealth remembers whether the API server answered the last probe, for
// /healthz/apiserver.
type apiHealth struct {
	mu    sync.Mutex
	err   error
	since time.Time
}

func (h *apiHealth) set(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if (err == nil) != (h.err == nil) {
		h.since = time.Now()
	}
	h.err = err
}

func (h *apiHealth) check() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		if apierrors.IsForbidden(h.err) || apierrors.IsUnauthorized(h.err) {
			return fmt.Errorf("API server refuses kube-proxy's requests since %s (check its RBAC binding to system:node-proxier): %w", h.since.UTC().Format(time.RFC3339), h.err)
		}
		return fmt.Errorf("API server unreachable since %s: %w", h.since.UTC().Format(time.RFC3339), h.err)
	}
	return nil
}

// probeAPI checks that the API server answers and that it lets kube-proxy read what
// it watches: /version alone is open to every authenticated user, so an identity
// without permissions would otherwise look healthy while its informers are denied.
func probeAPI(ctx context.Context, client clientset.Interface) error {
	if err := client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return err
	}
	_, err := client.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
	return err
}

// run probes the API server with backoff while it fails and every 10s otherwise.
// Informers retry on their own; this only makes the reason visible.
func (h *apiHealth) run(ctx context.Context, client clientset.Interface) {
	logger := klog.FromContext(ctx)
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 6, Cap: 30 * time.Second}
	delay := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		probeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := probeAPI(probeCtx, client)
		cancel()
		if ctx.Err() != nil {
			return
		}
		prev := h.check()
		h.set(err)
		if err != nil {
			if prev == nil {
				logger.Error(err, "API server unreachable; retrying with backoff, programmed rules stay in place")
			}
			delay = backoff.Step()
			if backoff.Steps == 0 {
				backoff.Steps = 1
			}
			continue
		}
		if prev != nil {
			logger.Info("API server reachable again")
		}
		backoff = wait.Backoff{Duration: time.Second, Factor: 2, Steps: 6, Cap: 30 * time.Second}
		delay = 10 * time.Second
	}
}

func serveHealthz(ctx context.Context, hz *healthcheck.ProxyHealthServer, errCh chan error) {
	if hz == nil {
		return
	}
	logger := klog.FromContext(ctx)
	fn := func(ctx context.Context) {
		err := hz.Run(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		logger.Error(err, "Healthz server failed")
		if errCh != nil {
			errCh <- fmt.Errorf("healthz server failed: %w", err)
			// With bindAddressHardFail there is no retry.
			<-ctx.Done()
		}
	}
	go wait.UntilWithContext(ctx, fn, 5*time.Second)
}

// newMetricsMux builds the handler of the metrics server: upstream's paths on a plain
// ServeMux (no k8s.io/apiserver).
func newMetricsMux(proxyMode kubeproxyconfig.ProxyMode, enableProfiling bool, flags *pflag.FlagSet, api *apiHealth) *http.ServeMux {
	mux := http.NewServeMux()
	// /healthz answers as upstream's does: the process serves (component-base's ping
	// check and nothing else). It deliberately ignores the API server: a liveness probe
	// pointed here must not restart every kube-proxy of a cluster during an API server
	// outage, when the rules they keep are what still carries traffic.
	healthz := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			fmt.Fprint(w, "[+]ping ok\nhealthz check passed\n")
			return
		}
		fmt.Fprint(w, "ok")
	}
	mux.HandleFunc("/healthz", healthz)
	mux.HandleFunc("/healthz/ping", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	// Added path (upstream has none): whether the API server answered the last probe,
	// and if not why (unreachable, or refusing kube-proxy's identity).
	mux.HandleFunc("/healthz/apiserver", func(w http.ResponseWriter, _ *http.Request) {
		if err := api.check(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	})
	slis.SLIMetricsWithReset{}.Install(mux)
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fmt.Fprintf(w, "%s", proxyMode)
	})
	mux.Handle("/metrics", legacyregistry.Handler())
	if enableProfiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/flags/v", func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPut {
				http.Error(w, "only PUT is supported", http.StatusMethodNotAllowed)
				return
			}
			body := make([]byte, 64)
			n, _ := r.Body.Read(body)
			msg, err := logs.GlogSetter(strings.TrimSpace(string(body[:n])))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprint(w, msg)
		})
	}
	configz.InstallHandler(mux)
	if flags != nil && features.DefaultFeatureGate.Enabled("ComponentFlagz") {
		mux.HandleFunc("/flagz", flagzHandler(flags))
	}
	return mux
}

// flagzHandler lists the command's flags and their effective values, as text, like
// upstream's /flagz.
func flagzHandler(fs *pflag.FlagSet) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		var lines []string
		fs.VisitAll(func(f *pflag.Flag) {
			lines = append(lines, fmt.Sprintf("%s=%s", f.Name, f.Value.String()))
		})
		sort.Strings(lines)
		fmt.Fprintf(w, "%s flagz\nWarning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.\n\n%s\n",
			kubeProxy, strings.Join(lines, "\n"))
	}
}

func serveMetrics(ctx context.Context, bindAddress string, proxyMode kubeproxyconfig.ProxyMode, enableProfiling bool, flags *pflag.FlagSet, api *apiHealth, errCh chan error) {
	if bindAddress == "" {
		return
	}
	logger := klog.FromContext(ctx)
	mux := newMetricsMux(proxyMode, enableProfiling, flags, api)
	fn := func(ctx context.Context) {
		listener, err := netutils.MultiListen(ctx, "tcp", bindAddress)
		if err != nil {
			logger.Error(err, "Starting metrics server failed", "address", bindAddress)
			if errCh != nil {
				errCh <- fmt.Errorf("metrics server on %s: %w", bindAddress, err)
				<-ctx.Done()
			}
			return
		}
		server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-ctx.Done()
			_ = server.Close()
		}()
		if err := server.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Metrics server failed", "address", bindAddress)
		}
	}
	go wait.UntilWithContext(ctx, fn, 5*time.Second)
}
