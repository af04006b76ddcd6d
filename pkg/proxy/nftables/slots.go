//go:build linux

package nftables

import (
	"hash/fnv"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// Endpoint maps.
//
// A service port's policy chain (without session affinity) load-balances with
// one rule, "dnat to numgen random mod N offset B map @endpoints-G-SS", over
// N consecutive slots B..B+N-1 of a shared map that holds "ip . port" per slot.
// This shape is what makes small changes cheap in the kernel:
//
//   - Replacing an endpoint only rewrites its slot's element. Map elements that
//     are plain data (not verdicts) do not make the kernel re-validate the
//     table, while any new rule with a dnat, jump or goto does, and that
//     validation walks every rule reachable from the base chains: ~100 ms at
//     10k Services with one rule per endpoint, on every such commit.
//   - Changing the endpoint count rewrites one rule per chain, and with one
//     rule per chain the validation walk is about ten times shorter.
//
// Why shared, sharded maps: a per-chain named map costs a linear search of the
// table's sets on every reference (55 s of kernel time to load 10k Services),
// an anonymous map per chain costs a linear search for a free name (36 s),
// and a single map is walked in full each time a new rule binds to it
// (2.5 minutes). 256 maps per protocol, picked by a hash of the chain name,
// keep every such walk short and cost nothing when unused (a map exists only
// once it has elements to hold). Per protocol, because a map's port type is
// declared as "tcp dport", "udp dport" or "sctp dport": the protocol-neutral
// "th dport" is refused by nft 1.0.6 once the map is read back from the
// kernel.
//
// Generations: slot assignments live only in this process. Instead of reading
// them back from the kernel, every full sync writes the endpoints into maps of
// a fresh generation G (a number no existing map uses), switches every chain
// over, and only then deletes the old maps. Each intermediate state — also
// between the transactions of a chunked cold start — has every chain pointing
// at complete data of its own, so a restart or a repair never sends a packet
// to another Service's endpoints.
const (
	endpointMapShards = 256
	endpointMapPrefix = "endpoints-"
	// numEndpointMaps is the number of endpoint maps per generation: a set
	// of shards per protocol in endpointMapProtocols.
	numEndpointMaps = endpointMapShards * 3
)

var endpointMapProtocols = [...]string{"tcp", "udp", "sctp"}

// endpointMapName names endpoint map i (protocol i/256, shard i%256) of
// generation gen, e.g. "endpoints-0-tcp-3f".
func endpointMapName(gen, i int) string {
	const hex = "0123456789abcdef"
	shard := i % endpointMapShards
	return endpointMapPrefix + strconv.Itoa(gen) + "-" + endpointMapProtocols[i/endpointMapShards] + "-" + string([]byte{hex[shard>>4], hex[shard&0xf]})
}

// endpointMapTypeOf declares endpoint map i's types for address family ipX.
func endpointMapTypeOf(ipX string, i int) string {
	return "numgen random mod 1 : " + ipX + " daddr . " + endpointMapProtocols[i/endpointMapShards] + " dport"
}

// endpointMapGeneration returns the generation of an endpoint map name, or
// -1 when name is not one.
func endpointMapGeneration(name string) int {
	rest, ok := strings.CutPrefix(name, endpointMapPrefix)
	if !ok {
		return -1
	}
	g, _, ok := strings.Cut(rest, "-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(g)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// endpointMapIndex picks the endpoint map of chain, whose endpoints speak
// protocol.
func endpointMapIndex(chain, protocol string) int {
	proto := max(0, slices.Index(endpointMapProtocols[:], protocol))
	h := fnv.New32a()
	_, _ = h.Write([]byte(chain))
	return proto*endpointMapShards + int(h.Sum32()%endpointMapShards)
}

// slotRange is a run of slots in endpoint map mapIndex. size is its
// capacity, a power of two, so freed runs are reused by chains of similar size.
type slotRange struct {
	mapIndex int
	base     uint32
	size     uint32
}

// slotAllocator assigns slot ranges to policy chains within one generation.
// A range freed during a sync is reused only after that sync committed: until
// then the kernel may still hold the old owner's elements there, and chunked
// transactions must never show a chain someone else's endpoints.
type slotAllocator struct {
	ranges   map[string]slotRange
	next     [numEndpointMaps]uint32
	free     [numEndpointMaps]map[uint32][]uint32
	released []slotRange
}

func newSlotAllocator() *slotAllocator {
	return &slotAllocator{ranges: map[string]slotRange{}}
}

// reserve returns chain's range for n (> 0) endpoints of protocol: its
// current one when n still fits well (more than a quarter used), otherwise a
// new one.
func (a *slotAllocator) reserve(chain, protocol string, n int) slotRange {
	if r, ok := a.ranges[chain]; ok {
		if uint32(n) <= r.size && (r.size <= 4 || uint32(n) > r.size/4) {
			return r
		}
		a.released = append(a.released, r)
	}
	size := uint32(1)
	if n > 1 {
		size = 1 << bits.Len32(uint32(n-1))
	}
	m := endpointMapIndex(chain, protocol)
	r := slotRange{mapIndex: m, size: size}
	if bases := a.free[m][size]; len(bases) > 0 {
		r.base = bases[len(bases)-1]
		a.free[m][size] = bases[:len(bases)-1]
	} else {
		r.base = a.next[m]
		a.next[m] += size
	}
	a.ranges[chain] = r
	return r
}

// release frees chain's range, if it has one.
func (a *slotAllocator) release(chain string) {
	if r, ok := a.ranges[chain]; ok {
		a.released = append(a.released, r)
		delete(a.ranges, chain)
	}
}

// commit makes the ranges released so far reusable: the sync that stopped
// using them has been applied.
func (a *slotAllocator) commit() {
	for _, r := range a.released {
		if a.free[r.mapIndex] == nil {
			a.free[r.mapIndex] = map[uint32][]uint32{}
		}
		a.free[r.mapIndex][r.size] = append(a.free[r.mapIndex][r.size], r.base)
	}
	a.released = a.released[:0]
}

// slotSpec is a policy chain's endpoint map range and what its slots hold.
// Once built it is never modified: the view keeps the applied one as its
// belief of the kernel's content.
type slotSpec struct {
	chain    string
	mapIndex int // endpoint map index
	base     uint32
	values   []string // "ip . port" of slot base+i
}
