//go:build linux

package nftables

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/proxy/syncshell"
)

// Drift: once per syncPeriod the Shell asks whether the kernel still holds
// what this backend programmed (syncshell.DriftChecker).
//
// Cheap when nothing drifted: the kernel keeps one ruleset generation for
// all tables, which every committed transaction moves. After each of its
// own writes the syncer records the generation; when the kernel's is still
// that one, nobody wrote anything since, and the check is one netlink
// request. When it moved (by anyone: another program's table counts too),
// our table is dumped over netlink (nldump.go) and compared with the view:
// every chain (its existence, its rule count, each rule's comment, and a
// fingerprint of its rules' expressions), every named set and map, and
// every element of the sets and maps whose elements the syncer owns. When
// all matches, the generation is recorded as verified; a change to another
// table then costs one comparison and reports nothing.
//
// Rule text is not compared: the kernel holds compiled expressions, and nft
// prints them back in its own canonical form. A rule's expressions are
// fingerprinted instead (without counters and other state the packet path
// changes), and each chain's fingerprint is learned by the first check
// after this process wrote the chain: read back at once when the generation
// shows nobody else wrote since, else taken from the comparison. A later
// check that finds another fingerprint reports the chain. So a rule
// replaced by one with the same comment is missed only when that happened
// between our write and the next check while another commit also moved the
// generation; a rule deleted, added or re-commented is always found.
//
// Only what a full sync repairs is reported, so that a drift never makes
// every check a full sync: objects of our table the syncer does not own (a
// chain or set someone added with a name the syncer never uses) are left
// alone, as the full sync leaves them; a chain or set with a generated name,
// or an endpoint map of another generation, is reported, since a full sync
// deletes them. Element comments and the contents of affinity sets (which
// the packet path fills) are not compared.
//
// Drift kinds (the repair metric's "kind" label).
const (
	driftTable      = "table"
	driftChain      = "chain"
	driftRule       = "rule"
	driftSet        = "set"
	driftMap        = "map"
	driftSetElement = "set element"
	driftMapElement = "map element"
)

// genLedger records the generation spans this process's own commits made,
// shared by the syncers of both families of a dual-stack proxier: each
// family's writes move the one generation the kernel keeps, and without it
// the other family's check would take them for another program's and
// compare its whole table at every check of a busy cluster.
type genLedger struct {
	mu sync.Mutex
	// spans are (from, to] generation ranges that only our commits made,
	// the most recent last.
	spans [][2]uint32
}

// maxLedgerSpans bounds the spans kept: a check needs those since the last
// check (one syncPeriod), and a span older than that only costs a
// comparison when it is missing.
const maxLedgerSpans = 256

func newGenLedger() *genLedger { return &genLedger{} }

// record notes that the generation went from from to to by our commits only.
func (l *genLedger) record(from, to uint32) {
	if l == nil || from == to {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.spans) == maxLedgerSpans {
		l.spans = slices.Delete(l.spans, 0, 1)
	}
	l.spans = append(l.spans, [2]uint32{from, to})
}

// covers reports whether every commit between generations from and to
// (from < to) was one of ours.
func (l *genLedger) covers(from, to uint32) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for cur := from; cur != to; {
		i := slices.IndexFunc(l.spans, func(s [2]uint32) bool { return s[0] == cur })
		if i < 0 {
			return false
		}
		end := l.spans[i][1]
		if end-cur > to-cur {
			return false // a span past to: not the history between from and to
		}
		cur = end
	}
	return true
}

// unchanged reports whether nobody but this process committed between
// generations from and to.
func (d *driftState) unchanged(from, to uint32) bool {
	return from == to || d.ledger.covers(from, to)
}

// driftState is what the syncer keeps for the check.
type driftState struct {
	// ledger, shared with the other family's syncer in a dual-stack
	// proxier, holds the generation spans our own commits made.
	ledger *genLedger
	// reader dumps the table; nil (a fake, a dry run, a caller's
	// knftables.Interface) falls back to checking that the table and its
	// canary chain are there (tableMissing).
	reader *tableReader
	// gen is the kernel's generation after our last write or check;
	// verified says the kernel matched the view at gen.
	gen      uint32
	verified bool
	// compares counts the dumps of the table, for tests and benchmarks.
	compares int
	// fingerprints of the chains' rules, by chain, learned from the
	// kernel while it matched the view; dropped for a chain whenever this
	// process writes it, and learned again by the next check (unlearned
	// names those, allUnlearned all after a full sync).
	fingerprints map[string]uint64
	unlearned    map[string]struct{}
	allUnlearned bool
	// fixed is what the syncer wrote outside the view: the chains, sets,
	// maps and elements of setup (and the cluster-ips-check chain).
	fixed fixedObjects
}

// fixedObjects are the table's objects that no service port owns.
type fixedObjects struct {
	chains map[string][]*string // rule comments, in order
	sets   map[string]fixedSet
}

type fixedSet struct {
	isMap bool
	// elements, when not nil, are the set's keys (" . " joined) mapped to
	// their values; nil for the containers the view tracks.
	elements map[string]string
}

func (f *fixedObjects) clone() fixedObjects {
	out := fixedObjects{chains: map[string][]*string{}, sets: map[string]fixedSet{}}
	for k, v := range f.chains {
		out.chains[k] = slices.Clone(v)
	}
	for k, v := range f.sets {
		if v.elements != nil {
			v.elements = maps.Clone(v.elements)
		}
		out.sets[k] = v
	}
	return out
}

// fixedAfter returns what the fixed objects are once ops are applied: ops
// on chains with generated names and on the view's containers' elements are
// the view's business.
func (d *driftState) fixedAfter(ops []op, full bool) fixedObjects {
	var f fixedObjects
	if full || d.fixed.chains == nil {
		// A full sync writes the fixed part anew (setup).
		f = fixedObjects{chains: map[string][]*string{}, sets: map[string]fixedSet{}}
	} else {
		f = d.fixed.clone()
	}
	for _, o := range ops {
		switch obj := o.obj.(type) {
		case *knftables.Chain:
			if isServiceChainName(obj.Name) {
				continue
			}
			switch o.verb {
			case opAdd:
				if _, ok := f.chains[obj.Name]; !ok {
					f.chains[obj.Name] = []*string{}
				}
			case opFlush:
				f.chains[obj.Name] = []*string{}
			case opDelete:
				delete(f.chains, obj.Name)
			}
		case *knftables.Rule:
			if isServiceChainName(obj.Chain) || o.verb != opAdd {
				continue
			}
			f.chains[obj.Chain] = append(f.chains[obj.Chain], obj.Comment)
		case *knftables.Set:
			f.setOp(o.verb, obj.Name, false)
		case *knftables.Map:
			f.setOp(o.verb, obj.Name, true)
		case *knftables.Element:
			name := obj.Set
			if name == "" {
				name = obj.Map
			}
			s, ok := f.sets[name]
			if !ok || s.elements == nil {
				continue
			}
			if o.verb == opAdd {
				s.elements[joinKey(obj.Key)] = joinKey(obj.Value)
			} else {
				delete(s.elements, joinKey(obj.Key))
			}
		}
	}
	return f
}

func (f *fixedObjects) setOp(verb opVerb, name string, isMap bool) {
	if isAffinitySetName(name) || endpointMapGeneration(name) >= 0 {
		return // the view's
	}
	_, container := containerByName[name]
	switch verb {
	case opAdd:
		if _, ok := f.sets[name]; !ok {
			s := fixedSet{isMap: isMap}
			if !container {
				s.elements = map[string]string{}
			}
			f.sets[name] = s
		}
	case opFlush:
		if s, ok := f.sets[name]; ok && s.elements != nil {
			s.elements = map[string]string{}
			f.sets[name] = s
		}
	case opDelete:
		delete(f.sets, name)
	}
}

var containerByName = func() map[string]container {
	m := map[string]container{}
	for c, name := range containerNames {
		m[name] = container(c)
	}
	return m
}()

// beforeWrite reads the generation before a write, for afterWrite. ok is
// false when it could not be read (or there is no reader).
func (d *driftState) beforeWrite() (gen uint32, ok bool) {
	if d.reader == nil {
		return 0, false
	}
	g, err := d.reader.generation()
	return g, err == nil
}

// afterWrite records a write of ours that made commits commits (each moves
// the generation by one) and rewrote chains (all of them when full). The
// kernel is still known to match the view only if it did before (or the
// write was full, which reads the kernel back first) and the generation
// moved by exactly our commits, so that no other writer's commit hides
// among ours.
func (d *driftState) afterWrite(before uint32, beforeOK bool, commits int, full bool, fixed *fixedObjects, chains func(func(string))) {
	if fixed != nil {
		d.fixed = *fixed
	}
	if d.unlearned == nil {
		d.unlearned = map[string]struct{}{}
	}
	if full {
		clear(d.fingerprints)
		clear(d.unlearned)
		d.allUnlearned = true
	} else if chains != nil {
		chains(func(name string) {
			delete(d.fingerprints, name)
			d.unlearned[name] = struct{}{}
		})
	}
	wasVerified := d.verified && d.unchanged(d.gen, before)
	d.verified = false
	if d.reader == nil || !beforeOK {
		return
	}
	after, err := d.reader.generation()
	if err != nil {
		return
	}
	d.gen = after
	if after-before == uint32(commits) {
		d.ledger.record(before, after)
		d.verified = full || wasVerified
	}
}

// writeFailed records a write that failed part way: what the kernel holds
// is unknown until the next full sync.
func (d *driftState) writeFailed() { d.verified = false }

// drift compares the kernel's table with the view (see the top of this
// file). It returns nothing when the generation did not move since the
// kernel last matched the view.
func (s *syncer) drift(ctx context.Context) ([]syncshell.Drift, error) {
	d := &s.driftState
	table := string(familyOf(s.family)) + " " + kubeProxyTable
	if d.reader == nil {
		if s.tableMissing(ctx) {
			return []syncshell.Drift{{Kind: driftTable, Object: table, Expected: "present with its rules", Found: "missing or flushed"}}, nil
		}
		return nil, nil
	}
	gen, err := d.reader.generation()
	if err != nil {
		return nil, fmt.Errorf("reading the nftables ruleset generation: %w", err)
	}
	if d.verified && d.unchanged(d.gen, gen) {
		d.gen = gen
		// Nobody wrote since the kernel last matched the view: what it
		// holds is what we wrote. Learn the fingerprints of the chains
		// written since the last check, so that a rule replaced later
		// by one with the same comment is noticed too.
		if err := s.learnFingerprints(); err != nil {
			return nil, fmt.Errorf("reading the rules of nftables table %s: %w", table, err)
		}
		return nil, nil
	}
	// The comparison dumps the whole table; a change that arrived since
	// the check started goes first (see syncshell's driftBeforeSync).
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.compares++
	var drifts []syncshell.Drift
	for attempt := 0; ; attempt++ {
		drifts, err = s.compareKernel(table)
		if !errors.Is(err, errDumpInterrupted) || attempt == 2 {
			break
		}
	}
	if err != nil {
		d.verified = false
		return nil, fmt.Errorf("reading the nftables table %s back: %w", table, err)
	}
	d.gen, d.verified = gen, len(drifts) == 0
	if d.verified {
		clear(d.unlearned)
		d.allUnlearned = false
	}
	return drifts, nil
}

// learnPerChainMax is how many written chains are read back one by one;
// past it (a full sync, many Services changed) one dump of the table's
// rules is cheaper.
const learnPerChainMax = 64

// learnFingerprints learns the fingerprints of the chains written since the
// last check, while the kernel is known to hold what was written.
func (s *syncer) learnFingerprints() error {
	d := &s.driftState
	if !d.allUnlearned && len(d.unlearned) == 0 {
		return nil
	}
	if d.fingerprints == nil {
		d.fingerprints = map[string]uint64{}
	}
	fps := map[string]uint64{}
	learn := func(chain string, rule kernelRule) {
		fp, ok := fps[chain]
		if !ok {
			fp = fnvOffset
		}
		fps[chain] = (fp ^ rule.fingerprint) * fnvPrime
	}
	if d.allUnlearned || len(d.unlearned) > learnPerChainMax {
		if err := d.reader.rules(kubeProxyTable, "", learn); err != nil {
			return err
		}
	} else {
		for chain := range d.unlearned {
			if err := d.reader.rules(kubeProxyTable, chain, learn); err != nil && !errors.Is(err, unix.ENOENT) {
				return err
			}
		}
	}
	for chain := range d.unlearned {
		if _, ok := fps[chain]; !ok {
			fps[chain] = fnvOffset // an empty (flushed) chain
		}
	}
	for chain, fp := range fps {
		if _, written := d.unlearned[chain]; d.allUnlearned || written {
			d.fingerprints[chain] = fp
		}
	}
	clear(d.unlearned)
	d.allUnlearned = false
	return nil
}

// FNV-1a's 64-bit constants, folding the rules' fingerprints into a
// chain's in order.
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

// compareKernel dumps the table and compares it with the view.
func (s *syncer) compareKernel(table string) ([]syncshell.Drift, error) {
	d := &s.driftState
	r := d.reader
	v := s.view
	var drifts []syncshell.Drift
	add := func(kind, object, expected, found string) {
		drifts = append(drifts, syncshell.Drift{Kind: kind, Object: object, Expected: expected, Found: found})
	}
	exists, err := r.tableExists(kubeProxyTable)
	if err != nil {
		return nil, err
	}
	if !exists {
		add(driftTable, table, "present", "")
		return drifts, nil
	}

	// Chains and their rules.
	type foundChain struct {
		rules []kernelRule
	}
	kchains := map[string]*foundChain{}
	if err := r.chains(kubeProxyTable, func(name string) { kchains[name] = &foundChain{} }); err != nil {
		return nil, fmt.Errorf("listing chains: %w", err)
	}
	if err := r.rules(kubeProxyTable, "", func(chain string, rule kernelRule) {
		if c := kchains[chain]; c != nil {
			c.rules = append(c.rules, rule)
		}
	}); err != nil {
		return nil, fmt.Errorf("listing rules: %w", err)
	}
	if d.fingerprints == nil {
		d.fingerprints = map[string]uint64{}
	}
	compareChain := func(name string, comments func(i int) *string, n int, known bool) {
		c := kchains[name]
		if c == nil {
			add(driftChain, name, "present", "")
			return
		}
		if !known {
			return
		}
		if len(c.rules) != n {
			add(driftRule, name, countRules(n), countRules(len(c.rules)))
			return
		}
		fp := fnvOffset
		for i, kr := range c.rules {
			want := comments(i)
			if (want != nil) != kr.hasComment || (want != nil && *want != kr.comment) {
				add(driftRule, name, "rule "+strconv.Itoa(i+1)+" "+describeComment(want != nil, ptrString(want)),
					"rule "+strconv.Itoa(i+1)+" "+describeComment(kr.hasComment, kr.comment))
				return
			}
			fp = (fp ^ kr.fingerprint) * fnvPrime
		}
		if old, ok := d.fingerprints[name]; ok && old != fp {
			add(driftRule, name, "the rules last verified", "changed rules")
			return
		}
		d.fingerprints[name] = fp
	}
	for name, comments := range d.fixed.chains {
		compareChain(name, func(i int) *string { return comments[i] }, len(comments), true)
	}
	for name, spec := range v.chains.have {
		if _, fixed := d.fixed.chains[name]; fixed {
			continue
		}
		if spec == nil {
			compareChain(name, nil, 0, false)
			continue
		}
		compareChain(name, func(i int) *string { return spec.rules[i].comment }, len(spec.rules), true)
	}
	for name := range kchains {
		if _, ok := v.chains.have[name]; ok {
			continue
		}
		if _, ok := d.fixed.chains[name]; ok {
			continue
		}
		if isServiceChainName(name) {
			add(driftChain, name, "", "present")
		}
	}

	// Sets and maps.
	ksets := map[string]bool{}
	if err := r.sets(kubeProxyTable, func(ks kernelSet) { ksets[ks.name] = ks.isMap }); err != nil {
		return nil, fmt.Errorf("listing sets and maps: %w", err)
	}
	wantSet := func(name string, isMap bool) bool {
		if _, ok := ksets[name]; ok {
			return true
		}
		add(setKind(isMap), name, "present", "")
		return false
	}
	for name, fs := range d.fixed.sets {
		if !wantSet(name, fs.isMap) {
			continue
		}
		if fs.elements != nil {
			if err := s.compareFixedElements(name, fs, add); err != nil {
				return nil, err
			}
		} else if c, ok := containerByName[name]; ok {
			if err := s.compareContainer(c, add); err != nil {
				return nil, err
			}
		}
	}
	for name := range v.sets.have {
		wantSet(name, false)
	}
	ranges := [numEndpointMaps][]*slotSpec{}
	for _, spec := range v.epSlots.have {
		ranges[spec.mapIndex] = append(ranges[spec.mapIndex], spec)
	}
	for i, have := range v.epMapsHave {
		if !have {
			continue
		}
		name := endpointMapName(v.epGen, i)
		if !wantSet(name, true) {
			continue
		}
		slices.SortFunc(ranges[i], func(a, b *slotSpec) int { return int(a.base) - int(b.base) })
		if err := s.compareEndpointMap(name, ranges[i], add); err != nil {
			return nil, err
		}
	}
	for name, isMap := range ksets {
		g := endpointMapGeneration(name)
		switch {
		case g >= 0 && (g != v.epGen || !v.epMapsHave[currentEndpointMapIndex(name)]):
		case isAffinitySetName(name):
			if _, ok := v.sets.have[name]; ok {
				continue
			}
		default:
			continue
		}
		add(setKind(isMap), name, "", "present")
	}
	return drifts, nil
}

// currentEndpointMapIndex is the index of an endpoint map of the current
// generation from its name, -1 when it is none.
func currentEndpointMapIndex(name string) int {
	parts := strings.Split(name, "-")
	if len(parts) != 4 {
		return -1
	}
	p := slices.Index(endpointMapProtocols[:], parts[2])
	shard, err := strconv.ParseUint(parts[3], 16, 8)
	if p < 0 || err != nil {
		return -1
	}
	return p*endpointMapShards + int(shard)
}

func countRules(n int) string {
	if n == 1 {
		return "1 rule"
	}
	return strconv.Itoa(n) + " rules"
}

func setKind(isMap bool) string {
	if isMap {
		return driftMap
	}
	return driftSet
}

func elementKind(isMap bool) string {
	if isMap {
		return driftMapElement
	}
	return driftSetElement
}

func describeComment(has bool, comment string) string {
	if !has {
		return "without a comment"
	}
	return "comment " + strconv.Quote(comment)
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// keyLayouts are the field types of each set's and map's key ('a' an
// address, 'p' a protocol, 'n' a port, 's' an endpoint slot), as appendKey
// writes them (nlbatch.go).
var keyLayouts = map[string]string{
	clusterIPsSet:              "a",
	nodePortIPsSet:             "a",
	hairpinConnectionsSet:      "aapn",
	serviceIPsMap:              "apn",
	firewallIPsMap:             "apn",
	noEndpointServicesMap:      "apn",
	noEndpointNodePortsMap:     "pn",
	serviceNodePortsMap:        "pn",
	localhostNodePortRejectMap: "pn",
}

// appendFields appends data, laid out as fields says, as nft writes it
// ("172.30.0.41 . tcp . 80"); ok is false when data does not fit. An
// address is 16 bytes in an ip6 table, 4 in an ip one.
func appendFields(out []byte, fields string, data []byte, ipv6 bool) ([]byte, bool) {
	for i, f := range []byte(fields) {
		if i > 0 {
			out = append(out, " . "...)
		}
		n := 4
		if f == 'a' && ipv6 {
			n = 16
		}
		if len(data) < n {
			return out, false
		}
		switch f {
		case 'a':
			if ipv6 {
				out = netip.AddrFrom16([16]byte(data[:16])).AppendTo(out)
			} else {
				out = netip.AddrFrom4([4]byte(data[:4])).AppendTo(out)
			}
		case 'p':
			if name := protocolNames[data[0]]; name != "" {
				out = append(out, name...)
			} else {
				out = strconv.AppendUint(out, uint64(data[0]), 10)
			}
		case 'n':
			out = strconv.AppendUint(out, uint64(binary.BigEndian.Uint16(data)), 10)
		case 's':
			out = strconv.AppendUint(out, uint64(binary.NativeEndian.Uint32(data)), 10)
		}
		data = data[n:]
	}
	return out, len(data) == 0
}

var protocolNames = func() map[byte]string {
	m := map[byte]string{}
	for name, num := range protocolNumbers {
		m[num] = name
	}
	return m
}()

// appendVerdict appends a verdict as nft writes a map's value.
func appendVerdict(out []byte, code int32, chain []byte) []byte {
	switch code {
	case verdictGoto:
		return append(append(out, "goto "...), cString(chain)...)
	case verdictJump:
		return append(append(out, "jump "...), cString(chain)...)
	case 0: // NF_DROP
		return append(out, "drop"...)
	case 1: // NF_ACCEPT
		return append(out, "accept"...)
	case -5:
		return append(out, "return"...)
	case -1:
		return append(out, "continue"...)
	}
	return strconv.AppendInt(append(out, "verdict "...), int64(code), 10)
}

// elementText formats a kernel element's key and value into buffers kept
// between elements.
type elementText struct {
	key, value []byte
}

func (t *elementText) format(e *kernelElem, keyFields, valueFields string, ipv6 bool) bool {
	var ok bool
	t.key, ok = appendFields(t.key[:0], keyFields, e.key, ipv6)
	t.value = t.value[:0]
	switch {
	case e.verdict:
		t.value = appendVerdict(t.value, e.code, e.verdictChain)
	case valueFields != "":
		var vok bool
		t.value, vok = appendFields(t.value, valueFields, e.value, ipv6)
		ok = ok && vok
	}
	return ok
}

// wantedElements is what one set or map should hold.
type wantedElements struct {
	name                   string
	isMap                  bool
	keyFields, valueFields string
	// get returns the wanted value of a key as nft writes it ("" in a set).
	get  func(key []byte) (string, bool)
	size int
	// each yields every wanted key and value.
	each func(yield func(key, value string))
}

// compareElements compares the kernel's elements of w.name with w,
// reporting every difference. It makes one pass that matches what the
// kernel holds, and a second one, to find which are missing, only when
// fewer matched than are wanted.
func (s *syncer) compareElements(w wantedElements, add func(kind, object, expected, found string)) error {
	var t elementText
	ipv6 := s.gen.ipX == "ip6"
	present := 0
	err := s.driftState.reader.elements(kubeProxyTable, w.name, func(e *kernelElem) {
		ok := t.format(e, w.keyFields, w.valueFields, ipv6)
		v, wanted := w.get(t.key)
		switch {
		case !ok || !wanted:
			add(elementKind(w.isMap), w.name+" "+string(t.key), "", nonEmpty(string(t.value)))
		case v != string(t.value):
			present++
			add(elementKind(w.isMap), w.name+" "+string(t.key), nonEmpty(v), nonEmpty(string(t.value)))
		default:
			present++
		}
	})
	if err != nil {
		return fmt.Errorf("listing the elements of %s: %w", w.name, err)
	}
	if present == w.size {
		return nil
	}
	found := map[string]bool{}
	err = s.driftState.reader.elements(kubeProxyTable, w.name, func(e *kernelElem) {
		if t.format(e, w.keyFields, w.valueFields, ipv6) {
			found[string(t.key)] = true
		}
	})
	if err != nil {
		return fmt.Errorf("listing the elements of %s: %w", w.name, err)
	}
	w.each(func(key, value string) {
		if !found[key] {
			add(elementKind(w.isMap), w.name+" "+key, nonEmpty(value), "")
		}
	})
	return nil
}

// nonEmpty is value, or "present" for a set element's empty value.
func nonEmpty(value string) string {
	if value == "" {
		return "present"
	}
	return value
}

func eachOf(m map[string]string) func(func(key, value string)) {
	return func(yield func(key, value string)) {
		for k, v := range m {
			yield(k, v)
		}
	}
}

func (s *syncer) compareContainer(c container, add func(kind, object, expected, found string)) error {
	have := s.view.elems[c].have
	name := containerNames[c]
	return s.compareElements(wantedElements{
		name: name, isMap: !c.isSet(), keyFields: keyLayouts[name],
		get:  func(key []byte) (string, bool) { v, ok := have[string(key)]; return v, ok },
		size: len(have), each: eachOf(have),
	}, add)
}

func (s *syncer) compareFixedElements(name string, fs fixedSet, add func(kind, object, expected, found string)) error {
	return s.compareElements(wantedElements{
		name: name, isMap: fs.isMap, keyFields: keyLayouts[name],
		get:  func(key []byte) (string, bool) { v, ok := fs.elements[string(key)]; return v, ok },
		size: len(fs.elements), each: eachOf(fs.elements),
	}, add)
}

// compareEndpointMap compares endpoint map name with the slot ranges the
// view believes it holds (sorted by base).
func (s *syncer) compareEndpointMap(name string, ranges []*slotSpec, add func(kind, object, expected, found string)) error {
	size := 0
	for _, r := range ranges {
		size += len(r.values)
	}
	return s.compareElements(wantedElements{
		name: name, isMap: true, keyFields: "s", valueFields: "an",
		get: func(key []byte) (string, bool) {
			slot, err := strconv.ParseUint(string(key), 10, 32)
			if err != nil {
				return "", false
			}
			i, found := slices.BinarySearchFunc(ranges, uint32(slot), func(r *slotSpec, slot uint32) int {
				switch {
				case slot < r.base:
					return 1
				case slot >= r.base+uint32(len(r.values)):
					return -1
				}
				return 0
			})
			if !found {
				return "", false
			}
			return ranges[i].values[uint32(slot)-ranges[i].base], true
		},
		size: size,
		each: func(yield func(key, value string)) {
			for _, r := range ranges {
				for i, v := range r.values {
					yield(strconv.FormatUint(uint64(r.base)+uint64(i), 10), v)
				}
			}
		},
	}, add)
}
