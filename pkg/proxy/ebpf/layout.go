package ebpf

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
)

// The map keys and values, laid out exactly as struct fe_key and friends in
// bpf/socketlb.c (a Linux test compares them with the bpf2go-generated types). They are
// declared here, not taken from the generated file, so that the layout logic below is
// platform-neutral and testable with a fake map.

const (
	familyV4 = 4
	familyV6 = 6

	protoTCP  = 6
	protoUDP  = 17
	protoSCTP = 132

	// setFlagReject: the set has no usable endpoint anywhere; connect/sendmsg fail
	// with ECONNREFUSED.
	setFlagReject = 1
)

type feKey struct {
	Addr   [4]uint32 // network byte order in memory; IPv4 in Addr[0]
	Port   uint16    // host byte order
	Proto  uint8
	Family uint8
}

type feVal struct {
	SetID uint32
}

type setVal struct {
	Count       uint32
	Flags       uint32
	AffinitySec uint32
	Pad         uint32
}

type beKey struct {
	SetID uint32
	Slot  uint32
}

type beVal struct {
	Addr [4]uint32
	Port uint16
	Pad  uint16
}

// addrWords stores a's bytes in the words the BPF program compares with the socket's
// address fields, which hold the address in network byte order in memory.
func addrWords(a netip.Addr) (w [4]uint32) {
	if a.Is4() {
		b := a.As4()
		w[0] = binary.NativeEndian.Uint32(b[:])
		return w
	}
	b := a.As16()
	for i := range w {
		w[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return w
}

// wordsAddr is addrWords' inverse.
func wordsAddr(w [4]uint32, family uint8) netip.Addr {
	var b [16]byte
	for i := range w {
		binary.NativeEndian.PutUint32(b[4*i:], w[i])
	}
	if family == familyV4 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16(b)
}

func makeFeKey(a netip.Addr, port uint16, proto uint8) feKey {
	fam := uint8(familyV6)
	if a.Is4() {
		fam = familyV4
	}
	return feKey{Addr: addrWords(a), Port: port, Proto: proto, Family: fam}
}

func (k feKey) String() string {
	return fmt.Sprintf("%s/%d", netip.AddrPortFrom(wordsAddr(k.Addr, k.Family), k.Port), k.Proto)
}

func makeBeVal(ap netip.AddrPort) beVal {
	return beVal{Addr: addrWords(ap.Addr()), Port: ap.Port()}
}

// Map is the part of *ebpf.Map the layout logic uses; tests substitute a recording fake.
type Map interface {
	Put(key, value any) error
	Delete(key any) error
}

// Maps are the load-balancing maps a Backend writes.
type Maps struct {
	Frontends, Sets, Backends Map
}

// programmedSet is what the maps hold for one endpoint set: its id, its slots in order
// and its set value.
type programmedSet struct {
	id    uint32
	slots []netip.AddrPort
	val   setVal
}

// planSlots returns the new slot order for want, given the slots programmed now: an
// endpoint that stays keeps its slot (so affinity entries, which remember a slot, stay
// valid), a new one takes a freed slot or goes at the end, and the end is moved into
// any slot still free so the slots stay dense. The result is a permutation of want.
func planSlots(old, want []netip.AddrPort) []netip.AddrPort {
	// Most services have a handful of endpoints: below that, linear scans beat
	// building two maps per set.
	var wanted, had func(netip.AddrPort) bool
	if len(old)*len(want) <= 256 {
		wanted = func(ap netip.AddrPort) bool { return slices.Contains(want, ap) }
		had = func(ap netip.AddrPort) bool { return slices.Contains(old, ap) }
	} else {
		w := make(map[netip.AddrPort]bool, len(want))
		for _, ap := range want {
			w[ap] = true
		}
		h := make(map[netip.AddrPort]bool, len(old))
		for _, ap := range old {
			h[ap] = true
		}
		wanted = func(ap netip.AddrPort) bool { return w[ap] }
		had = func(ap netip.AddrPort) bool { return h[ap] }
	}
	slots := make([]netip.AddrPort, len(old), max(len(old), len(want)))
	var holes []int
	for i, ap := range old {
		if wanted(ap) {
			slots[i] = ap
		} else {
			holes = append(holes, i)
		}
	}
	for _, ap := range want {
		if had(ap) {
			continue
		}
		if len(holes) > 0 {
			slots[holes[0]] = ap
			holes = holes[1:]
		} else {
			slots = append(slots, ap)
		}
	}
	// Fill the remaining holes, lowest first, from the end.
	for _, h := range holes {
		for len(slots) > 0 && !slots[len(slots)-1].IsValid() {
			slots = slots[:len(slots)-1]
		}
		if h >= len(slots) {
			break
		}
		slots[h] = slots[len(slots)-1]
		slots = slots[:len(slots)-1]
	}
	for len(slots) > 0 && !slots[len(slots)-1].IsValid() {
		slots = slots[:len(slots)-1]
	}
	return slots
}

// writeSet brings set id from old (nil: not programmed) to the endpoints want and the
// value val (whose Count it fills in). The order is what keeps readers safe: slots that
// change or are added are written first, then the set value with its count, and only
// then are the slots beyond the new count deleted. A reader holding the old count sees
// either an old endpoint or a new one in each slot, never a missing slot.
func (m *Maps) writeSet(id uint32, old *programmedSet, want []netip.AddrPort, val setVal) (*programmedSet, error) {
	var oldSlots []netip.AddrPort
	if old != nil {
		oldSlots = old.slots
	}
	slots := planSlots(oldSlots, want)
	for i, ap := range slots {
		if i < len(oldSlots) && oldSlots[i] == ap {
			continue
		}
		if err := m.Backends.Put(beKey{SetID: id, Slot: uint32(i)}, makeBeVal(ap)); err != nil {
			return nil, fmt.Errorf("writing endpoint %s to slot %d of set %d: %w", ap, i, id, err)
		}
	}
	val.Count = uint32(len(slots))
	if old == nil || old.val != val {
		if err := m.Sets.Put(id, val); err != nil {
			return nil, fmt.Errorf("writing set %d (count %d): %w", id, val.Count, err)
		}
	}
	for i := len(slots); i < len(oldSlots); i++ {
		if err := m.Backends.Delete(beKey{SetID: id, Slot: uint32(i)}); err != nil {
			return nil, fmt.Errorf("deleting slot %d of set %d: %w", i, id, err)
		}
	}
	return &programmedSet{id: id, slots: slots, val: val}, nil
}

// deleteSet removes a set no frontend refers to any more: the value first, so nothing
// can pick a slot, then the slots.
func (m *Maps) deleteSet(ps *programmedSet) error {
	if err := m.Sets.Delete(ps.id); err != nil {
		return fmt.Errorf("deleting set %d: %w", ps.id, err)
	}
	for i := range ps.slots {
		if err := m.Backends.Delete(beKey{SetID: ps.id, Slot: uint32(i)}); err != nil {
			return fmt.Errorf("deleting slot %d of set %d: %w", i, ps.id, err)
		}
	}
	return nil
}
