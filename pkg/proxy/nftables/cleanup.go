//go:build linux

package nftables

import (
	"context"

	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"
)

// CleanupLeftovers removes the kube-proxy table of both families. It returns
// true if an error was encountered; errors are logged.
func CleanupLeftovers(ctx context.Context) (encounteredError bool) {
	for _, family := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
		nft, err := knftables.New(family, kubeProxyTable)
		if err != nil {
			// No usable nft: nothing of ours can exist in this family.
			continue
		}
		encounteredError = cleanupTable(ctx, nft) || encounteredError
	}
	return encounteredError
}

func cleanupTable(ctx context.Context, nft knftables.Interface) bool {
	tx := nft.NewTransaction()
	tx.Delete(&knftables.Table{})
	if err := nft.Run(ctx, tx); err != nil && !isNotFound(err) {
		klog.FromContext(ctx).Error(err, "Error cleaning up nftables rules")
		return true
	}
	return false
}
