//go:build linux

package nftables

import (
	"context"
	"fmt"

	"sigs.k8s.io/knftables"
)

// counterReader feeds the localhost-nodeport rejected-packets metric from the
// named counters in our table (metrics may not import a backend, so the
// backend registers this reader with it).
type counterReader struct {
	nft knftables.Interface
}

// ReadCounters implements metrics.NFTablesCounterReader.
func (r counterReader) ReadCounters(ctx context.Context) (map[string]uint64, error) {
	counters, err := r.nft.ListCounters(ctx)
	if err != nil {
		if isNotFound(err) {
			return map[string]uint64{}, nil
		}
		return nil, fmt.Errorf("listing nftables counters of table %s: %w", kubeProxyTable, err)
	}
	out := make(map[string]uint64, len(counters))
	for _, c := range counters {
		// knftables' fake returns nil entries; real counters may lack stats.
		if c == nil || c.Packets == nil {
			continue
		}
		out[c.Name] = *c.Packets
	}
	return out, nil
}
