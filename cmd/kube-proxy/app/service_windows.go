//go:build windows

package app

// --windows-service: kube-proxy under the Windows service control manager (SCM), with
// upstream's service name. The ordering of a stop with the end of the run is
// serviceLifecycle's (winservice.go).

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/windows/svc"
	"k8s.io/klog/v2"
)

// serviceName is the name upstream's kube-proxy registers under, so existing service
// definitions keep working with this binary.
const serviceName = kubeProxy

func initForOS(windowsService bool) error {
	if !windowsService {
		return nil
	}
	l := newServiceLifecycle(serviceStopGrace)
	if err := startService(serviceName, l); err != nil {
		return err
	}
	runningService = l
	return nil
}

// startService connects to the SCM and returns once the service is running, or with
// the reason it could not (typically: not started by the SCM).
func startService(name string, l *serviceLifecycle) error {
	h := &scmHandler{life: l, started: make(chan struct{})}
	runErr := make(chan error, 1)
	go func() {
		err := svc.Run(name, h)
		// svc.Run returns once the SCM holds the final state.
		l.stopReported()
		runErr <- err
	}()
	select {
	case <-h.started:
		klog.InfoS("Running as a Windows service", "service", name)
		go func() {
			if err := <-runErr; err != nil {
				klog.ErrorS(err, "Windows service control ended with an error", "service", name)
			}
		}()
		return nil
	case err := <-runErr:
		if err == nil {
			err = errors.New("the service control manager ended the service before it started")
		}
		return fmt.Errorf("running as the Windows service %q (--windows-service): %w", name, err)
	}
}

// scmHandler answers the SCM for the running service.
type scmHandler struct {
	life    *serviceLifecycle
	started chan struct{}
}

// Execute reports the service running as soon as the SCM connects, as upstream's does
// (the proxy's own health is served on healthz), and turns Stop and Shutdown into the
// end of the run; it returns, so that the SCM is told the service stopped, once the
// run has returned (at most serviceStopGrace later).
func (h *scmHandler) Execute(_ []string, requests <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	status <- svc.Status{State: svc.StartPending}
	close(h.started)
	status <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown | svc.AcceptParamChange}

	// Both stay nil until a stop is requested: a run that ends on its own is a failure,
	// and the process exits without reporting, which the SCM's recovery actions handle
	// as they do upstream's.
	var runDone <-chan struct{}
	var timeout <-chan time.Time
	for {
		select {
		case <-runDone:
			return false, 0
		case <-timeout:
			klog.InfoS("Run did not return in time after the stop request; reporting the service stopped", "grace", h.life.grace)
			return false, 0
		case c := <-requests:
			switch c.Cmd {
			case svc.Interrogate, svc.ParamChange:
				status <- c.CurrentStatus
			case svc.Stop, svc.Shutdown:
				if timeout != nil {
					status <- c.CurrentStatus
					continue
				}
				klog.InfoS("Windows service stop requested", "command", c.Cmd)
				status <- svc.Status{State: svc.StopPending, WaitHint: uint32(h.life.grace / time.Millisecond)}
				h.life.requestStop()
				runDone, timeout = h.life.runDone(), time.After(h.life.grace)
			default:
				klog.V(2).InfoS("Ignoring an unexpected Windows service control", "command", c.Cmd)
			}
		}
	}
}
