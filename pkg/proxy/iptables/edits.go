//go:build linux

package iptables

import (
	"bytes"
	"strconv"

	utiliptables "k8s.io/net-utils/iptables"
)

// Why a partial sync edits the dispatch chains instead of rewriting them.
//
// Adding or removing a Service changes a few rules of KUBE-SERVICES and
// KUBE-NODEPORTS, which at 10k Services hold ~10k rules, each jumping to a
// different chain. Declared in a restore, such a chain is flushed and all
// its rules written again: on iptables-nft adding a Service at 10k took
// 1.46–1.70 s, 72% of the restore in iptables-nft-restore's sorted
// chain-name list (chunks.go); with edits it takes 374–430 ms, what
// appending any one rule costs there (test/bench/README.md). Legacy
// rewrites the whole table either way.
// So a partial sync whose top-level nat chains differ from the kernel's
// only in these rules deletes the rules that went ("-D chain rule", by
// their text, so a kernel that does not hold them fails the restore and the
// full sync that follows rewrites everything) and inserts the new ones at
// their positions. The resulting chains are exactly what a rewrite gives;
// a full sync, a sync after a failure and the once-per-syncPeriod repair
// (view.topLevelWrites) still rewrite them whole.

// maxDispatchEdits bounds the deleted and inserted rules of one sync: past
// it a rewrite is cheap next to what the sync writes anyway.
const maxDispatchEdits = 512

// dispatchChains are the chains t.dispatch writes.
var dispatchChains = [...]utiliptables.Chain{kubeServicesChain, kubeNodePortsChain}

// editDispatch writes to t.edits the restore lines that turn old, the
// dispatch rules the kernel holds, into t.dispatch, and reports whether it
// did; false (t.edits empty) means the chains are to be rewritten: too many
// edits, a line of another chain, or rules that changed order.
func (t *tables) editDispatch(old []byte) bool {
	t.edits.reset()
	t.editInserts = 0
	if t.writeDispatchEdits(old) {
		return true
	}
	t.edits.reset()
	t.editInserts = 0
	return false
}

func (t *tables) writeDispatchEdits(old []byte) bool {
	oldRules, newRules := 0, 0
	for _, chain := range dispatchChains {
		was, now := chainRules(old, chain), chainRules(t.dispatch.b, chain)
		oldRules, newRules = oldRules+len(was), newRules+len(now)
		inserts, ok := t.edits.writeEdits(chain, was, now)
		if !ok || t.edits.lines > maxDispatchEdits {
			return false
		}
		t.editInserts += inserts
	}
	// An edit of these chains cannot stand for a rewrite of another.
	return oldRules == bytes.Count(old, []byte{'\n'}) && newRules == bytes.Count(t.dispatch.b, []byte{'\n'})
}

// chainRules returns the rules of chain in the dispatch text b, each
// without its "-A chain " prefix and newline, in order. A last line without
// a newline is not counted, so the caller's line count refuses it.
func chainRules(b []byte, chain utiliptables.Chain) [][]byte {
	prefix := []byte("-A " + string(chain) + " ")
	var rules [][]byte
	for line := range bytes.Lines(b) {
		if len(line) > 0 && line[len(line)-1] == '\n' && bytes.HasPrefix(line, prefix) {
			rules = append(rules, line[len(prefix):len(line)-1])
		}
	}
	return rules
}

// writeEdits appends the deletions and insertions that turn chain's rules
// was into now, and returns how many rules it inserts and whether it could
// (if not, w holds partial output): the rules both hold must be
// in the same order in both. Deletions come first, by rule text; then each
// new rule is inserted at its position in now, in increasing order, so
// when it is inserted the rules before it are already in place.
func (w *ruleBuf) writeEdits(chain utiliptables.Chain, was, now [][]byte) (inserts int, ok bool) {
	// The common ends are most of a chain; only the middle is compared.
	p := 0
	for p < len(was) && p < len(now) && bytes.Equal(was[p], now[p]) {
		p++
	}
	s := 0
	for s < len(was)-p && s < len(now)-p && bytes.Equal(was[len(was)-1-s], now[len(now)-1-s]) {
		s++
	}
	wasMid, nowMid := was[p:len(was)-s], now[p:len(now)-s]
	if len(wasMid)+len(nowMid) > maxDispatchEdits {
		return 0, false
	}
	inNow := make(map[string]struct{}, len(nowMid))
	for _, r := range nowMid {
		inNow[string(r)] = struct{}{}
	}
	inWas := make(map[string]struct{}, len(wasMid))
	var kept [][]byte
	var inChain map[string]int // how often each rule of was stands in it
	for _, r := range wasMid {
		inWas[string(r)] = struct{}{}
		if _, ok := inNow[string(r)]; ok {
			kept = append(kept, r)
			continue
		}
		// "-D chain rule" deletes the first rule with that text: it must
		// be this one.
		if inChain == nil {
			inChain = make(map[string]int, len(was))
			for _, r := range was {
				inChain[string(r)]++
			}
		}
		if inChain[string(r)] > 1 {
			return 0, false
		}
		w.line("-D", string(chain), string(r))
	}
	k := 0
	for i, r := range nowMid {
		if _, ok := inWas[string(r)]; ok {
			// A rule both hold: it must be the next one kept, or the
			// order changed and positions would not hold.
			if k >= len(kept) || !bytes.Equal(kept[k], r) {
				return 0, false
			}
			k++
			continue
		}
		w.line("-I", string(chain), strconv.Itoa(p+i+1), string(r))
		inserts++
	}
	return inserts, k == len(kept)
}
