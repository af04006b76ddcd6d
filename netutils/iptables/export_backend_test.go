package iptables

import (
	"context"

	utilexec "k8s.io/utils/exec"
)

// DetectBackendWith is DetectBackend running its commands through exec, for the
// kernel tests, which run them inside a network namespace.
func DetectBackendWith(ctx context.Context, exec utilexec.Interface) (Detection, error) {
	return detectBackend(ctx, exec)
}

// ChooseBackendWith is ChooseBackend running its commands through exec.
func ChooseBackendWith(ctx context.Context, exec utilexec.Interface, mode BackendMode) (BackendChoice, error) {
	return chooseBackend(ctx, exec, mode)
}
