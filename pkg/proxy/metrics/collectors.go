package metrics

import (
	"context"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/util/nfacct"
)

// nfacctGetter is the part of nfacct.Interface the collector needs.
type nfacctGetter interface {
	Get(name string) (*nfacct.Counter, error)
}

// nfacctCollector exports the packet count of one nfacct counter.
type nfacctCollector struct {
	metrics.BaseStableCollector
	client  nfacctGetter
	counter string
	desc    *metrics.Desc
}

var _ metrics.StableCollector = &nfacctCollector{}

// newNFAcctCollector returns nil when the kernel offers no nfacct, so the
// caller registers nothing.
func newNFAcctCollector(counter string, desc *metrics.Desc) metrics.StableCollector {
	client, err := nfacct.New()
	if err != nil {
		klog.ErrorS(err, "Failed to initialize nfacct client; counter will not be exported", "counter", counter)
		return nil
	}
	return &nfacctCollector{client: client, counter: counter, desc: desc}
}

func (c *nfacctCollector) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- c.desc }

func (c *nfacctCollector) CollectWithStability(ch chan<- metrics.Metric) {
	ctr, err := c.client.Get(c.counter)
	if err != nil {
		// Before the first sync the counter does not exist yet.
		klog.V(4).InfoS("Failed to read nfacct counter", "counter", c.counter, "err", err)
		return
	}
	m, err := metrics.NewConstMetric(c.desc, metrics.CounterValue, float64(ctr.Packets))
	if err != nil {
		klog.ErrorS(err, "Failed to build metric from nfacct counter", "counter", c.counter)
		return
	}
	ch <- m
}

// NFTablesCounterReader reads named counters from one IP family's
// kube-proxy nftables table.
type NFTablesCounterReader interface {
	// ReadCounters returns packet counts keyed by counter name. A table that
	// does not exist yet should yield an empty map and no error.
	ReadCounters(ctx context.Context) (map[string]uint64, error)
}

// SetNFTablesCounterReader makes the localhost NodePort rejected-packets
// metric read family's counters through r; nil removes the reader. The
// nftables proxier calls this, since metrics may not import a backend.
func SetNFTablesCounterReader(family v1.IPFamily, r NFTablesCounterReader) {
	nftCounters.setReader(family, r)
}

// nftCounterReadTimeout bounds one family's read during a scrape.
const nftCounterReadTimeout = 2 * time.Second

// nftCounterCollector exports the localhost-nodeport-rejected-* counters,
// labelled by ip_family and protocol.
type nftCounterCollector struct {
	metrics.BaseStableCollector
	desc *metrics.Desc
	// protocols maps a counter name to its protocol label.
	protocols map[string]string

	mu      sync.Mutex
	readers map[v1.IPFamily]NFTablesCounterReader
}

var _ metrics.StableCollector = &nftCounterCollector{}

var nftCounters = newNFTCounterCollector(localhostNodePortRejectedDesc)

func newNFTCounterCollector(desc *metrics.Desc) *nftCounterCollector {
	p := make(map[string]string, len(LocalhostNodePortRejectableProtocols))
	for _, proto := range LocalhostNodePortRejectableProtocols {
		p[LocalhostNodePortRejectedCounterName(proto)] = string(proto)
	}
	return &nftCounterCollector{desc: desc, protocols: p, readers: map[v1.IPFamily]NFTablesCounterReader{}}
}

func (c *nftCounterCollector) setReader(family v1.IPFamily, r NFTablesCounterReader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r == nil {
		delete(c.readers, family)
		return
	}
	c.readers[family] = r
}

func (c *nftCounterCollector) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- c.desc }

func (c *nftCounterCollector) CollectWithStability(ch chan<- metrics.Metric) {
	c.mu.Lock()
	families := make([]v1.IPFamily, 0, len(c.readers))
	readers := make(map[v1.IPFamily]NFTablesCounterReader, len(c.readers))
	for f, r := range c.readers {
		families = append(families, f)
		readers[f] = r
	}
	c.mu.Unlock()
	slices.Sort(families)

	for _, fam := range families {
		ctx, cancel := context.WithTimeout(context.Background(), nftCounterReadTimeout)
		counts, err := readers[fam].ReadCounters(ctx)
		cancel()
		if err != nil {
			klog.ErrorS(err, "Failed to read nftables counters", "ipFamily", fam)
			continue
		}
		for name, packets := range counts {
			proto, ok := c.protocols[name]
			if !ok {
				continue
			}
			m, err := metrics.NewConstMetric(c.desc, metrics.CounterValue, float64(packets), string(fam), proto)
			if err != nil {
				klog.ErrorS(err, "Failed to build metric from nftables counter", "counter", name)
				continue
			}
			ch <- m
		}
	}
}
