package winkernel

import (
	"fmt"
	"net"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"k8s.io/kube-proxy/pkg/features"
	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
)

// Network types and the stale load balancer bound, upstream's names.
const (
	NETWORK_TYPE_OVERLAY  = "overlay"
	NETWORK_TYPE_L2BRIDGE = "L2Bridge"

	// MAX_COUNT_STALE_LOADBALANCERS is how many load balancers whose
	// deletion failed one sync retries deleting.
	MAX_COUNT_STALE_LOADBALANCERS = 20
)

// Enum returns HNS's protocol number for p: 6, 17, 132; 0 for anything else.
func Enum(p v1.Protocol) uint16 {
	switch p {
	case v1.ProtocolTCP:
		return 6
	case v1.ProtocolUDP:
		return 17
	case v1.ProtocolSCTP:
		return 132
	}
	return 0
}

// IsHnsNotRunningError reports whether err says the HNS service is not
// running (ERROR_SERVICE_NOT_ACTIVE in its text, as hnslib reports it).
func IsHnsNotRunningError(err error) bool {
	return hcnapi.IsHNSNotRunning(err)
}

// IsPolicyAlreadyExists reports whether err says a load balancer with the
// same frontend already exists (HCN_E_PORT_ALREADY_EXISTS, or
// ERROR_ALREADY_EXISTS in its text).
func IsPolicyAlreadyExists(err error) bool {
	if err == nil {
		return false
	}
	return hcnapi.IsPortAlreadyExists(err) || isPortAlreadyExistsPlatform(err) ||
		strings.Contains(err.Error(), hcnapi.ErrorCodeFileAlreadyExists)
}

// KernelCompatTester tells whether the host can run the winkernel proxier.
type KernelCompatTester interface {
	IsCompatible() error
}

// CanUseWinKernelProxier reports whether kcompat finds the host able to run
// the winkernel proxier; the error says why not.
func CanUseWinKernelProxier(kcompat KernelCompatTester) (bool, error) {
	if err := kcompat.IsCompatible(); err != nil {
		return false, err
	}
	return true, nil
}

// WindowsKernelCompatTester asks HNS whether it answers; on other systems
// it always says no.
type WindowsKernelCompatTester struct{}

// StackCompatTester tells whether the host and network can run dual-stack.
type StackCompatTester interface {
	DualStackCompatible(networkName string) bool
}

// DualStackCompatTester asks HNS (on Windows; elsewhere the answer is no).
type DualStackCompatTester struct{}

// HostMacProvider finds the MAC address of the interface holding nodeIP.
type HostMacProvider interface {
	GetHostMac(nodeIP net.IP) string
}

// localHostMacProvider reads the host's interfaces.
type localHostMacProvider struct{}

func (localHostMacProvider) GetHostMac(nodeIP net.IP) string {
	interfaces, _ := net.Interfaces()
	for _, inter := range interfaces {
		addrs, _ := inter.Addrs()
		for _, addr := range addrs {
			ip, _, err := netutils.ParseCIDRSloppy(addr.String())
			if err == nil && ip.Equal(nodeIP) {
				klog.V(2).InfoS("Record host MAC address", "addr", inter.HardwareAddr)
				return inter.HardwareAddr.String()
			}
		}
	}
	return ""
}

// HostNetworkService is the proxier's access to HNS. Its methods are
// unexported, as upstream's: it is implemented inside this package only.
type HostNetworkService interface {
	getNetworkByName(name string) (*hcnapi.Network, error)
	deleteLoadBalancer(hnsID string) error
}

// hns is the HostNetworkService over an hcnapi.Interface.
type hns struct {
	hcn hcnapi.Interface
}

var _ HostNetworkService = hns{}

func (h hns) getNetworkByName(name string) (*hcnapi.Network, error) {
	return h.hcn.GetNetworkByName(name)
}

func (h hns) deleteLoadBalancer(hnsID string) error {
	err := h.hcn.DeleteLoadBalancer(hnsID)
	if hcnapi.IsNotFound(err) {
		return nil
	}
	return err
}

// getNetworkName returns --network-name, or the KUBE_NETWORK environment
// variable when the flag is empty.
func getNetworkName(name string) (string, error) {
	if name != "" {
		return name, nil
	}
	klog.V(3).InfoS("Flag --network-name not set, checking environment variable")
	if name = os.Getenv("KUBE_NETWORK"); name == "" {
		return "", fmt.Errorf("neither --network-name nor the environment variable KUBE_NETWORK is set")
	}
	return name, nil
}

// dualStackCompatible is DualStackCompatible over h: HNS must support
// dual-stack and the network must not be an overlay (VXLAN networks on
// Windows are single-stack).
func dualStackCompatible(h hcnapi.Interface, networkName string) bool {
	if !h.Features().IPv6DualStack {
		klog.InfoS("This version of Windows does not support dual-stack, falling back to single-stack")
		return false
	}
	name, err := getNetworkName(networkName)
	if err != nil {
		klog.ErrorS(err, "Unable to determine dual-stack status, falling back to single-stack")
		return false
	}
	n, err := h.GetNetworkByName(name)
	if err != nil {
		klog.ErrorS(err, "Unable to determine dual-stack status, falling back to single-stack", "network", name)
		return false
	}
	if features.DefaultFeatureGate.Enabled(features.WinOverlay) && n.IsOverlay() {
		klog.InfoS("Winoverlay does not support dual-stack, falling back to single-stack")
		return false
	}
	return true
}

// cleanupLoadBalancers deletes every HNS load balancer (kube-proxy owns
// them all, as upstream assumes); true if one could not be deleted.
func cleanupLoadBalancers(h hcnapi.Interface) (encounteredError bool) {
	lbs, err := h.ListLoadBalancers()
	if err != nil {
		klog.ErrorS(err, "Listing HNS load balancers failed")
		return true
	}
	klog.V(3).InfoS("Deleting all existing load balancers", "lbCount", len(lbs))
	for _, lb := range lbs {
		if err := h.DeleteLoadBalancer(lb.ID); err != nil && !hcnapi.IsNotFound(err) {
			klog.ErrorS(err, "Error deleting existing load balancer", "hnsID", lb.ID)
			encounteredError = true
		}
	}
	return encounteredError
}
