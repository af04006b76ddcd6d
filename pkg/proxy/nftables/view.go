//go:build linux

package nftables

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// wantElem is a desired element. Several service ports may claim the same key
// (the cluster-ips set is shared by all ports of a Service; two Services may
// share an endpoint in the hairpin set); the first claimant's value wins and the
// element lives until its last claimant goes away.
type wantElem struct {
	claim          // the holder's
	others []claim // the other claimants, in owner order
}

type claim struct {
	owner   string
	value   string
	comment *string
}

// find returns owner's place among w's claimants in owner order (0 is the
// holder, i > 0 is others[i-1]) and whether owner is there.
func (w *wantElem) find(owner string) (int, bool) {
	if owner == w.owner {
		return 0, true
	}
	if compareOwners(owner, w.owner) < 0 {
		return 0, false
	}
	i, found := slices.BinarySearchFunc(w.others, owner, func(c claim, o string) int { return compareOwners(c.owner, o) })
	return i + 1, found
}

// view is the authoritative in-memory picture of the kube-proxy table: what we
// want in it and what we believe the kernel holds. Partial syncs diff the two
// for the service ports that changed only; the kernel is read back only on
// full syncs (startup, periodic, after an error).
type view struct {
	addrType string // element type of affinity sets
	ipX      string // "ip" or "ip6"

	// Endpoint maps (slots.go): the current generation, its slot
	// assignments, which of its maps exist in the kernel, per policy chain
	// its slots in the kernel and wanted, and the maps of older generations
	// to delete once nothing refers to them.
	epGen      int
	slots      *slotAllocator
	epMapsHave [numEndpointMaps]bool
	epSlots    tracked[*slotSpec, *slotSpec]
	retired    []string
	// netlinkOrder orders a plan for element batches over netlink
	// (nlbatch.go): diff creates the endpoint maps a plan needs before any
	// of its slots, and adds the elements a batch can carry before the
	// others, so that each forms one run of element units instead of
	// alternating with nft runs.
	netlinkOrder bool
	// tableAbsent is set by reload when the kernel had no kube-proxy table:
	// nothing is being served from it, so a plan need not be safe to cut.
	tableAbsent bool

	// Chains owned by service ports (a nil have value: exists, content
	// unknown), affinity sets (by timeout) and the elements of each
	// container (by key).
	chains tracked[*chainSpec, *chainSpec]
	sets   tracked[time.Duration, time.Duration]
	elems  [numContainers]tracked[string, *wantElem]

	stale  map[string]time.Time // flushed chains waiting to be deleted
	owners map[string]*serviceRules

	// conflicts are the frontend keys wanted by more than one owner that
	// have been reported; newConflicts those not reported yet.
	conflicts    map[conflict]struct{}
	newConflicts []conflict
}

const unknownTimeout = time.Duration(-1)

func newView(ipX, addrType string) *view {
	v := &view{
		addrType:  addrType,
		ipX:       ipX,
		slots:     newSlotAllocator(),
		epSlots:   newTracked[*slotSpec, *slotSpec](),
		chains:    newTracked[*chainSpec, *chainSpec](),
		sets:      newTracked[time.Duration, time.Duration](),
		stale:     map[string]time.Time{},
		owners:    map[string]*serviceRules{},
		conflicts: map[conflict]struct{}{},
	}
	for c := range numContainers {
		v.elems[c] = newTracked[string, *wantElem]()
	}
	return v
}

// tracked is one kind of object in the view: what the kernel is believed to
// hold (have), what is wanted (want), and the names touched since the last
// diff, the only ones the next diff compares.
type tracked[H, W any] struct {
	have    map[string]H
	want    map[string]W
	touched map[string]struct{}
}

func newTracked[H, W any]() tracked[H, W] {
	return tracked[H, W]{have: map[string]H{}, want: map[string]W{}, touched: map[string]struct{}{}}
}

func (t *tracked[H, W]) touch(name string) { t.touched[name] = struct{}{} }

// setWant wants w under name.
func (t *tracked[H, W]) setWant(name string, w W) {
	t.want[name] = w
	t.touched[name] = struct{}{}
}

// dropWant no longer wants name.
func (t *tracked[H, W]) dropWant(name string) {
	delete(t.want, name)
	t.touched[name] = struct{}{}
}

// touchAll touches everything held or wanted, for a full reconcile.
func (t *tracked[H, W]) touchAll() {
	for name := range t.have {
		t.touched[name] = struct{}{}
	}
	for name := range t.want {
		t.touched[name] = struct{}{}
	}
}

// takeTouched returns the touched names, sorted, and forgets them.
func (t *tracked[H, W]) takeTouched() []string {
	names := sortedKeys(t.touched)
	// A new map, not clear: a cleared map keeps the table it grew to, and a
	// full sync touches every name once.
	t.touched = map[string]struct{}{}
	return names
}

// reserveSlots implements slotSource.
func (v *view) reserveSlots(chain, protocol string, n int) (string, int, uint32) {
	r := v.slots.reserve(chain, protocol, n)
	return endpointMapName(v.epGen, r.mapIndex), r.mapIndex, r.base
}

// newGeneration starts a new endpoint map generation, numbered so that it
// clashes with none of the existing maps, which are retired. existing is what
// the kernel listed; when the listing failed (listed false), the maps this
// process believes it created are retired instead.
func (v *view) newGeneration(existing []string, listed bool) {
	used := map[int]bool{}
	v.retired = v.retired[:0]
	for _, name := range existing {
		if g := endpointMapGeneration(name); g >= 0 {
			used[g] = true
			v.retired = append(v.retired, name)
		}
	}
	for i, have := range v.epMapsHave {
		if have && !listed {
			used[v.epGen] = true
			v.retired = append(v.retired, endpointMapName(v.epGen, i))
		}
	}
	slices.Sort(v.retired)
	gen := 0
	for used[gen] {
		gen++
	}
	v.epGen = gen
	v.slots = newSlotAllocator()
	v.epMapsHave = [numEndpointMaps]bool{}
	clear(v.epSlots.have)
}

// setOwner replaces everything owner contributes with r (nil removes it).
func (v *view) setOwner(owner string, r *serviceRules) {
	if old := v.owners[owner]; old != nil {
		for i := range old.slots {
			chain := old.slots[i].chain
			if v.epSlots.want[chain] == &old.slots[i] {
				v.epSlots.dropWant(chain)
			}
			v.epSlots.touch(chain)
			if r == nil || !slices.ContainsFunc(r.slots, func(s slotSpec) bool { return s.chain == chain }) {
				v.slots.release(chain)
			}
		}
		for i := range old.chains {
			name := old.chains[i].name
			if v.chains.want[name] == &old.chains[i] {
				v.chains.dropWant(name)
			}
			v.chains.touch(name)
		}
		for _, s := range old.sets {
			v.sets.dropWant(s.name)
		}
		for _, e := range old.elems {
			v.unclaim(owner, e)
		}
		delete(v.owners, owner)
	}
	if r == nil {
		return
	}
	v.owners[owner] = r
	for i := range r.chains {
		v.chains.setWant(r.chains[i].name, &r.chains[i])
	}
	for _, s := range r.sets {
		v.sets.setWant(s.name, s.timeout)
	}
	for _, e := range r.elems {
		v.claim(owner, e)
	}
	for i := range r.slots {
		v.epSlots.setWant(r.slots[i].chain, &r.slots[i])
	}
}

// claim records that owner wants element e. When several owners want the same
// key, the first in namespace/name/port order holds it, as in the iptables
// mode (whose first matching rule is that of the first service port in sorted
// order), so the winner depends neither on the order in which service ports
// were synced nor on map iteration.
func (v *view) claim(owner string, e elemSpec) {
	v.elems[e.c].touch(e.key)
	cl := claim{owner: owner, value: e.value, comment: e.comment}
	w := v.elems[e.c].want[e.key]
	if w == nil {
		v.noteConflicts(e.c, e.key, owner)
		v.elems[e.c].want[e.key] = &wantElem{claim: cl}
		return
	}
	i, found := w.find(owner)
	if found {
		return // the same service port listing a key twice (e.g. its cluster IP)
	}
	v.noteConflicts(e.c, e.key, owner)
	if i == 0 {
		// The newcomer sorts first: it takes the element over and the
		// previous holder becomes the first of the others.
		w.claim, cl = cl, w.claim
		i = 1
	}
	w.others = slices.Insert(w.others, i-1, cl)
}

func (v *view) unclaim(owner string, e elemSpec) {
	v.elems[e.c].touch(e.key)
	w := v.elems[e.c].want[e.key]
	if w == nil {
		return
	}
	switch i, found := w.find(owner); {
	case !found:
	case i > 0:
		w.others = slices.Delete(w.others, i-1, i)
	case len(w.others) == 0:
		delete(v.elems[e.c].want, e.key)
	default:
		// The next claimant is copied out first: slices.Delete zeroes the
		// element it drops, and in "w.claim, w.others = w.others[0],
		// slices.Delete(...)" Go may evaluate the call before the index,
		// which handed the element to an empty claim (value "": a partial
		// sync of the holder of a shared LoadBalancer IP wrote "ip . port
		// : " and failed in nft).
		next := w.others[0]
		w.others = slices.Delete(w.others, 0, 1)
		w.claim = next
	}
}

// frontendContainers returns the pair of containers that together say where
// traffic for a frontend key (an "IP . protocol . port" or a "protocol .
// NodePort") goes, so that a key claimed in both by different owners is a
// conflict too; ok is false for containers whose shared keys are no conflict
// (the cluster-ips set, the hairpin set) or imply one in a frontend container.
func frontendContainers(c container) (primary, partner container, ok bool) {
	switch c {
	case cServiceIPs, cNoEndpointServices:
		return cServiceIPs, cNoEndpointServices, true
	case cServiceNodePorts, cNoEndpointNodePorts:
		return cServiceNodePorts, cNoEndpointNodePorts, true
	}
	return 0, 0, false
}

// conflict is a frontend key wanted by two owners, a sorting before b.
type conflict struct {
	c    container // the primary container of the frontend
	key  string
	a, b string
}

// noteConflicts records, once per pair of owners and frontend, that owner
// wants a frontend key that another owner already holds or waits for. It runs
// before owner's claim is recorded.
func (v *view) noteConflicts(c container, key, owner string) {
	primary, partner, ok := frontendContainers(c)
	if !ok {
		return
	}
	for _, pc := range [2]container{primary, partner} {
		w := v.elems[pc].want[key]
		if w == nil {
			continue
		}
		v.noteConflict(primary, key, owner, w.owner)
		for _, o := range w.others {
			v.noteConflict(primary, key, owner, o.owner)
		}
	}
}

func (v *view) noteConflict(primary container, key, owner, other string) {
	if owner == other {
		return
	}
	a, b := owner, other
	if compareOwners(a, b) > 0 {
		a, b = b, a
	}
	k := conflict{c: primary, key: key, a: a, b: b}
	if _, seen := v.conflicts[k]; seen {
		return
	}
	v.conflicts[k] = struct{}{}
	v.newConflicts = append(v.newConflicts, k)
}

// takeNewConflicts returns the conflicts found since the last call, and
// forgets those that no longer exist, so that one reappearing is reported
// again. A conflict that lasts is reported once, however many syncs rebuild it.
func (v *view) takeNewConflicts() []conflict {
	out := v.newConflicts
	v.newConflicts = nil
	for k := range v.conflicts {
		if !v.wants(k.c, k.key, k.a) || !v.wants(k.c, k.key, k.b) {
			delete(v.conflicts, k)
		}
	}
	return out
}

// wants reports whether owner claims the frontend key in primary or its
// partner container.
func (v *view) wants(primary container, key, owner string) bool {
	_, partner, _ := frontendContainers(primary)
	for _, c := range [2]container{primary, partner} {
		if w := v.elems[c].want[key]; w != nil {
			if _, found := w.find(owner); found {
				return true
			}
		}
	}
	return false
}

// compareOwners orders owners (ServicePortName strings, "namespace/name" or
// "namespace/name:port") by namespace, then name, then port name, the order
// the iptables mode writes its service rules in.
func compareOwners(a, b string) int {
	an, as, ap := splitOwner(a)
	bn, bs, bp := splitOwner(b)
	return cmp.Or(strings.Compare(an, bn), strings.Compare(as, bs), strings.Compare(ap, bp))
}

func splitOwner(owner string) (namespace, name, port string) {
	namespace, rest, _ := strings.Cut(owner, "/")
	name, port, _ = strings.Cut(rest, ":")
	return namespace, name, port
}

// resetDesired forgets all desired state (a full sync recomputes it).
func (v *view) resetDesired() {
	clear(v.owners)
	clear(v.chains.want)
	clear(v.sets.want)
	clear(v.epSlots.want)
	for c := range numContainers {
		clear(v.elems[c].want)
	}
}

// reload replaces the believed kernel state with what the kernel reports, and
// marks everything touched so that the next plan reconciles all of it. A
// container that cannot be listed is flushed by the plan instead.
func (v *view) reload(ctx context.Context, nft knftables.Interface, pl *plan, enabled [numContainers]bool, logger klog.Logger) {
	// What a listing below fails to replace is kept by name only: chains of
	// unknown content, sets of unknown timeout, and no stale chains (those
	// still present get a fresh timestamp when they are flushed again).
	v.invalidate()
	if err := listHave(ctx, nft, "chains", isServiceChainName, v.chains.have, nil); err != nil {
		logger.Error(err, "Failed to list nftables chains; keeping the last known list")
	}
	if err := listHave(ctx, nft, "sets", isAffinitySetName, v.sets.have, unknownTimeout); err != nil {
		// The names are kept (stale ones still need deleting); the plan
		// re-adds every wanted set, which is harmless if it is there.
		logger.Error(err, "Failed to list nftables sets; re-adding the wanted ones")
	}

	mapNames, err := nft.List(ctx, "maps")
	if err != nil && !isNotFound(err) {
		logger.Error(err, "Failed to list nftables maps; deleting the endpoint maps known to exist")
	}
	v.newGeneration(mapNames, err == nil || isNotFound(err))
	// Without the table (a cold start, or after it was deleted) there are
	// no elements either, and listing each container is an nft run that
	// fails: seven of them were ~50 ms of a 1k-Service cold start's 180.
	v.tableAbsent = isNotFound(err)

	for c := range numContainers {
		clear(v.elems[c].have)
		if !enabled[c] || v.tableAbsent {
			continue
		}
		elems, err := nft.ListElements(ctx, c.kind(), containerNames[c])
		if err != nil && !isNotFound(err) {
			logger.Error(err, "Failed to list nftables elements; flushing", "containerType", c.kind(), "containerName", containerNames[c])
			if c.isSet() {
				pl.flush(&knftables.Set{Name: containerNames[c]})
			} else {
				pl.flush(&knftables.Map{Name: containerNames[c]})
			}
			continue
		}
		for _, e := range elems {
			v.elems[c].have[joinKey(e.Key)] = joinKey(e.Value)
		}
	}
	pl.endUnit()
	v.chains.touchAll()
	v.sets.touchAll()
	v.epSlots.touchAll()
	for c := range numContainers {
		v.elems[c].touchAll()
	}
}

// listHave replaces have with the objects of kind that the kernel lists and
// ours accepts, each believed to hold h. When the listing fails (other than
// for a missing table) have is kept and the error returned.
func listHave[H any](ctx context.Context, nft knftables.Interface, kind string, ours func(string) bool, have map[string]H, h H) error {
	names, err := nft.List(ctx, kind)
	if err != nil && !isNotFound(err) {
		return err
	}
	clear(have)
	for _, name := range names {
		if ours(name) {
			have[name] = h
		}
	}
	return nil
}

func joinKey(k []string) string { return strings.Join(k, " . ") }

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// pending records what the believed state becomes once the plan is applied.
type pending struct {
	// elemKeys are the element keys the diff looked at, per container:
	// once applied, each holds what is wanted (or nothing). Keeping the
	// keys rather than a record per changed element saves a cold start at
	// 10k Services ~6 MB of allocation while the plan is built.
	elemKeys [numContainers][]string
	chains   []*chainSpec // chain written (or flushed: empty rules)
	sets     []setSpec
	delSet   []string
	stale    []string
	slots    []pendingSlots
	epMaps   []int // endpoint maps created
	retired  int   // how many of view.retired were deleted
}

// pendingSlots: chain's slots hold want (nil: nothing) once applied.
type pendingSlots struct {
	chain string
	want  *slotSpec
}

type pendingElem struct {
	c   container
	key string
}

// diff appends to pl the operations that turn the believed state into the
// desired one for everything touched since the last diff, in an order that is
// safe to cut between units: affinity sets and endpoint map data, then
// chains, then element additions and changes, then removals (elements before
// the chains and sets they reference), and last the retired endpoint maps.
func (v *view) diff(pl *plan) *pending {
	pend := &pending{}

	// Endpoint slots are written before the chains that read them; slots a
	// chain stopped using are removed after it was rewritten.
	touchedSlots := v.epSlots.takeTouched()
	if v.netlinkOrder {
		for _, chain := range touchedSlots {
			if want := v.epSlots.want[chain]; want != nil {
				v.addEndpointMap(pl, pend, want.mapIndex)
			}
		}
		pl.endUnit()
	}
	for _, chain := range touchedSlots {
		want, have := v.epSlots.want[chain], v.epSlots.have[chain]
		if want == nil {
			continue
		}
		if v.addEndpointMap(pl, pend, want.mapIndex) {
			pl.endUnit()
		}
		name := endpointMapName(v.epGen, want.mapIndex)
		if have == nil || have.mapIndex != want.mapIndex || have.base != want.base {
			pl.addSlots(name, want.base, want.values, 0, len(want.values))
			pl.endUnit()
		} else {
			n := min(len(have.values), len(want.values))
			for i := range n {
				if have.values[i] != want.values[i] {
					pl.deleteSlots(name, want.base, i, i+1)
					pl.addSlots(name, want.base, want.values, i, i+1)
					pl.endUnit()
				}
			}
			if len(want.values) > n {
				pl.addSlots(name, want.base, want.values, n, len(want.values))
				pl.endUnit()
			}
		}
		if have != want {
			pend.slots = append(pend.slots, pendingSlots{chain: chain, want: want})
		}
	}

	touchedSets := v.sets.takeTouched()
	for _, name := range touchedSets {
		want, ok := v.sets.want[name]
		if !ok {
			continue
		}
		if have, exists := v.sets.have[name]; exists && have == want {
			continue
		}
		pl.add(&knftables.Set{
			Name: name,
			Type: v.addrType,
			Flags: []knftables.SetFlag{
				// nft adds "dynamic" to sets updated from the packet path;
				// asking for it up front keeps later adds idempotent.
				knftables.DynamicFlag,
				knftables.TimeoutFlag,
			},
			Timeout: ptr.To(want),
		})
		pl.endUnit()
		pend.sets = append(pend.sets, setSpec{name: name, timeout: want})
	}

	touchedChains := v.chains.takeTouched()
	// Write chains so that every jump/goto target is created first:
	// endpoint chains, then policy chains, then external/firewall chains.
	slices.SortStableFunc(touchedChains, func(a, b string) int { return chainRank(a) - chainRank(b) })
	for _, name := range touchedChains {
		want := v.chains.want[name]
		if want == nil {
			continue
		}
		have, exists := v.chains.have[name]
		if exists && want.equal(have) {
			continue
		}
		pl.add(&knftables.Chain{Name: name})
		if exists {
			pl.flush(&knftables.Chain{Name: name})
		}
		for _, r := range want.rules {
			pl.add(&knftables.Rule{Chain: name, Rule: r.rule, Comment: r.comment})
		}
		pl.endUnit()
		pend.chains = append(pend.chains, want)
	}

	var removals []pendingElem
	order := containerOrder
	if v.netlinkOrder {
		order = netlinkContainerOrder
	}
	for _, c := range order {
		keys := v.elems[c].takeTouched()
		pend.elemKeys[c] = keys
		for _, key := range keys {
			want := v.elems[c].want[key]
			have, exists := v.elems[c].have[key]
			switch {
			case want == nil && exists:
				removals = append(removals, pendingElem{c: c, key: key})
			case want == nil:
			case !exists || have != want.value:
				if exists {
					pl.deleteElement(c, key)
				}
				pl.addElement(c, key, want.value, want.comment)
				pl.endUnit()
			}
		}
	}
	for _, r := range removals {
		pl.deleteElement(r.c, r.key)
		pl.endUnit()
	}

	for _, chain := range touchedSlots {
		want, have := v.epSlots.want[chain], v.epSlots.have[chain]
		if have == nil {
			continue
		}
		name := endpointMapName(v.epGen, have.mapIndex)
		switch {
		case want == nil || want.mapIndex != have.mapIndex || want.base != have.base:
			pl.deleteSlots(name, have.base, 0, len(have.values))
		case len(have.values) > len(want.values):
			pl.deleteSlots(name, have.base, len(want.values), len(have.values))
		default:
			continue
		}
		pl.endUnit()
		if want == nil {
			pend.slots = append(pend.slots, pendingSlots{chain: chain})
		}
	}

	for _, name := range touchedChains {
		if _, wanted := v.chains.want[name]; wanted {
			continue
		}
		have, exists := v.chains.have[name]
		if !exists {
			continue
		}
		if have == nil || len(have.rules) > 0 {
			pl.flush(&knftables.Chain{Name: name})
			pl.endUnit()
		}
		pend.stale = append(pend.stale, name)
	}

	for _, name := range touchedSets {
		if _, wanted := v.sets.want[name]; wanted {
			continue
		}
		if _, exists := v.sets.have[name]; exists {
			pl.delete(&knftables.Set{Name: name})
			pl.endUnit()
			pend.delSet = append(pend.delSet, name)
		}
	}

	// Every chain that could refer to a retired map has been rewritten or
	// flushed above (a full sync rewrites all of them).
	for _, name := range v.retired {
		pl.delete(&knftables.Map{Name: name})
		pl.endUnit()
	}
	pend.retired = len(v.retired)

	return pend
}

// addEndpointMap adds endpoint map i of the current generation to pl unless
// it exists or pend already creates it, and reports whether it did.
func (v *view) addEndpointMap(pl *plan, pend *pending, i int) bool {
	if v.epMapsHave[i] || slices.Contains(pend.epMaps, i) {
		return false
	}
	pl.add(&knftables.Map{
		Name:    endpointMapName(v.epGen, i),
		TypeOf:  endpointMapTypeOf(v.ipX, i),
		Comment: ptr.To("service endpoints by slot (see the rules using it)"),
	})
	pend.epMaps = append(pend.epMaps, i)
	return true
}

// commit makes the believed state match a successfully applied plan.
func (v *view) commit(pend *pending, now time.Time) {
	for c, keys := range pend.elemKeys {
		if len(v.elems[c].have) == 0 && len(keys) > 0 {
			// A cold start fills the map at once: sized for it, it is
			// not copied as it grows (~6 MB at 10k Services).
			v.elems[c].have = make(map[string]string, len(keys))
		}
		for _, key := range keys {
			if want := v.elems[c].want[key]; want != nil {
				v.elems[c].have[key] = want.value
			} else {
				delete(v.elems[c].have, key)
			}
		}
	}
	for _, ch := range pend.chains {
		v.chains.have[ch.name] = ch
		delete(v.stale, ch.name)
	}
	for _, name := range pend.stale {
		v.chains.have[name] = &chainSpec{name: name}
		if _, ok := v.stale[name]; !ok {
			v.stale[name] = now
		}
	}
	for _, s := range pend.sets {
		v.sets.have[s.name] = s.timeout
	}
	for _, name := range pend.delSet {
		delete(v.sets.have, name)
	}
	for _, i := range pend.epMaps {
		v.epMapsHave[i] = true
	}
	for _, ps := range pend.slots {
		if ps.want == nil {
			delete(v.epSlots.have, ps.chain)
		} else {
			v.epSlots.have[ps.chain] = ps.want
		}
	}
	v.retired = v.retired[pend.retired:]
	v.slots.commit()
}

// invalidate drops trust in the believed kernel state after a failed
// transaction; the next (full) sync reloads it.
func (v *view) invalidate() {
	for name := range v.chains.have {
		v.chains.have[name] = nil
	}
	for name := range v.sets.have {
		v.sets.have[name] = unknownTimeout
	}
	clear(v.stale)
}

func chainRank(name string) int {
	switch {
	case strings.HasPrefix(name, endpointChainPrefix):
		return 0
	case strings.HasPrefix(name, clusterPolicyChainPrefix), strings.HasPrefix(name, localPolicyChainPrefix):
		return 1
	default:
		return 2
	}
}
