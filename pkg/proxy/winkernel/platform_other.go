//go:build !windows

package winkernel

import (
	"errors"

	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
)

var errNotWindows = errors.New("the winkernel proxier needs the Windows Host Networking Service; this is not Windows")

func newPlatformHCN() (hcnapi.Interface, error) { return nil, errNotWindows }

func isPortAlreadyExistsPlatform(error) bool { return false }

// IsCompatible always fails: there is no HNS here.
func (WindowsKernelCompatTester) IsCompatible() error { return errNotWindows }

// DualStackCompatible is always false: there is no HNS here.
func (DualStackCompatTester) DualStackCompatible(string) bool { return false }
