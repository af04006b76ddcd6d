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
	nftReaders.set(family, r)
}

// nftCounterReadTimeout bounds one family's read during a scrape.
const nftCounterReadTimeout = 2 * time.Second

// readerSet holds the per-family readers; it outlives any one collector so
// readers may be installed before or after registration.
type readerSet struct {
	mu      sync.Mutex
	readers map[v1.IPFamily]NFTablesCounterReader
}

var nftReaders = &readerSet{readers: map[v1.IPFamily]NFTablesCounterReader{}}

func (s *readerSet) set(family v1.IPFamily, r NFTablesCounterReader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r == nil {
		delete(s.readers, family)
		return
	}
	s.readers[family] = r
}

// snapshot returns the readers ordered by family, for stable output.
func (s *readerSet) snapshot() ([]v1.IPFamily, map[v1.IPFamily]NFTablesCounterReader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fams := make([]v1.IPFamily, 0, len(s.readers))
	out := make(map[v1.IPFamily]NFTablesCounterReader, len(s.readers))
	for f, r := range s.readers {
		fams = append(fams, f)
		out[f] = r
	}
	slices.Sort(fams)
	return fams, out
}

// nftCounterCollector exports the localhost-nodeport-rejected-* counters,
// labelled by ip_family and protocol.
type nftCounterCollector struct {
	metrics.BaseStableCollector
	desc *metrics.Desc
	// protocols maps a counter name to its protocol label.
	protocols map[string]string
	readers   *readerSet
}

var _ metrics.StableCollector = &nftCounterCollector{}

func newNFTCounterCollector(desc *metrics.Desc, readers *readerSet) *nftCounterCollector {
	p := make(map[string]string, len(LocalhostNodePortRejectableProtocols))
	for _, proto := range LocalhostNodePortRejectableProtocols {
		p[LocalhostNodePortRejectedCounterName(proto)] = string(proto)
	}
	return &nftCounterCollector{desc: desc, protocols: p, readers: readers}
}

func (c *nftCounterCollector) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- c.desc }

func (c *nftCounterCollector) CollectWithStability(ch chan<- metrics.Metric) {
	families, readers := c.readers.snapshot()

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
