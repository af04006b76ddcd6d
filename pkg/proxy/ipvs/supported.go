//go:build linux

package ipvs

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	utilipvs "k8s.io/net-utils/ipvs"
)

// CanUseIPVSProxier returns nil if IPVS mode can run here: the kernel has
// IPVS, ipset is at least MinIPSetCheckVersion, and the kernel knows
// scheduler (checked by creating and deleting a throwaway virtual server,
// unless one already uses it).
func CanUseIPVSProxier(ctx context.Context, ipvs utilipvs.Interface, ipsetver IPSetVersioner, scheduler string) error {
	logger := klog.FromContext(ctx)
	if ipvs == nil {
		return errors.New("ipvs not supported by the kernel")
	}
	if err := ensureMinVersion(ipsetver); err != nil {
		return err
	}
	if scheduler == "" {
		scheduler = defaultScheduler
	}
	vss, err := ipvs.GetVirtualServers()
	if err != nil {
		return fmt.Errorf("reading IPVS virtual servers: %w", err)
	}
	for _, vs := range vss {
		if vs.Scheduler == scheduler {
			logger.V(5).Info("VS exist, Skipping checks")
			return nil
		}
	}
	// 198.51.100.0/24 is TEST-NET-2: nothing real uses it.
	vs := utilipvs.VirtualServer{
		Address:   netutils.ParseIPSloppy("198.51.100.0"),
		Protocol:  "TCP",
		Port:      20000,
		Scheduler: scheduler,
	}
	if err := ipvs.AddVirtualServer(&vs); err != nil {
		return fmt.Errorf("creating a test virtual server with scheduler %q: %w", scheduler, err)
	}
	after, err := ipvs.GetVirtualServers()
	if err != nil {
		return fmt.Errorf("reading IPVS virtual servers: %w", err)
	}
	if len(after) == 0 {
		// Some kernels accept the request and create nothing.
		return errors.New("ipvs not supported: the test virtual server was not created")
	}
	if err := ipvs.DeleteVirtualServer(&vs); err != nil {
		return fmt.Errorf("deleting the test virtual server: %w", err)
	}
	return nil
}
