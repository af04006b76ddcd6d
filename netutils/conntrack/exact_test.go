//go:build linux

/*
Copyright The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package conntrack

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// fakeExact records per-flow deletions; flows listed in fail return an error, flows in gone
// are reported as not deleted.
type fakeExact struct {
	calls []*netlink.ConntrackFlow
	fail  *FlowSet
	gone  *FlowSet
}

func (f *fakeExact) deleteExact(_ uint8, flow *netlink.ConntrackFlow) (bool, error) {
	f.calls = append(f.calls, flow)
	if f.fail != nil && f.fail.MatchConntrackFlow(flow) {
		return false, unix.ENOBUFS
	}
	if f.gone != nil && f.gone.MatchConntrackFlow(flow) {
		return false, nil
	}
	return true, nil
}

func TestDeleteEntriesPaths(t *testing.T) {
	icmp := mkFlow(unix.IPPROTO_ICMP, "198.18.0.1:0", "198.18.10.1:0", "198.18.10.1:0")
	tests := []struct {
		name       string
		flows      []*netlink.ConntrackFlow
		fail, gone []*netlink.ConntrackFlow
		wantExact  int // deleteExact calls
		wantDumps  int
		wantN      int
		wantErr    bool
	}{
		{name: "small batch goes flow by flow", flows: manyFlows(3), wantExact: 3, wantN: 3},
		{name: "duplicates and nils are skipped", flows: append(manyFlows(2), nil, manyFlows(1)[0]), wantExact: 2, wantN: 2},
		{name: "at the limit", flows: manyFlows(maxExactDeletes), wantExact: maxExactDeletes, wantN: maxExactDeletes},
		{name: "over the limit dumps once", flows: manyFlows(maxExactDeletes + 1), wantDumps: 1, wantN: 10},
		{name: "a protocol without ports forces the dump", flows: []*netlink.ConntrackFlow{udpDNAT, icmp}, wantDumps: 1},
		{name: "gone flows are not counted", flows: manyFlows(3), gone: manyFlows(3)[1:2], wantExact: 3, wantN: 2},
		{name: "errors are collected, the rest proceeds", flows: manyFlows(4), fail: manyFlows(4)[:2], wantExact: 4, wantN: 2, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fe := &fakeExact{fail: NewFlowSet(tc.fail), gone: NewFlowSet(tc.gone)}
			h := &fakeHandle{entries: manyFlows(10)}
			ct := newConntracker(h, fe, nil)
			n, err := ct.DeleteEntries(unix.AF_INET, tc.flows)
			if (err != nil) != tc.wantErr || n != tc.wantN {
				t.Fatalf("DeleteEntries = %d, %v; want %d, error %v", n, err, tc.wantN, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, unix.ENOBUFS) {
				t.Errorf("error %v does not wrap the cause", err)
			}
			if len(fe.calls) != tc.wantExact || h.deleteCalls != tc.wantDumps {
				t.Errorf("exact calls %d, dumps %d; want %d and %d", len(fe.calls), h.deleteCalls, tc.wantExact, tc.wantDumps)
			}
		})
	}
}

// entryMsg builds a ctnetlink entry message as the kernel sends it: nfgenmsg, then
// attributes with the nested flag set.
func entryMsg(id uint32, reply *netlink.IPTuple) []byte {
	msg := []byte{unix.AF_INET, 0, 0, 0}
	msg = append(msg, nl.NewRtAttr(nl.CTA_ID, binary.BigEndian.AppendUint32(nil, id)).Serialize()...)
	if reply != nil {
		a, _ := tupleAttr(nl.CTA_TUPLE_REPLY, unix.AF_INET, reply)
		msg = append(msg, a.Serialize()...)
	}
	return msg
}

func TestParseIDAndReply(t *testing.T) {
	reply := &udpDNAT.Reverse
	id, got, err := parseIDAndReply(entryMsg(42, reply))
	if err != nil || id != 42 || !sameTuple(got, reply) {
		t.Fatalf("parseIDAndReply = %d, %+v, %v; want 42, %+v", id, got, err, reply)
	}
	other := *reply
	other.SrcIP = net.IPv4(198, 18, 1, 99)
	if sameTuple(got, &other) {
		t.Error("sameTuple ignores the reply source")
	}
	for name, msg := range map[string][]byte{
		"short":          {2},
		"no reply":       entryMsg(1, nil),
		"no id":          entryMsg(1, reply)[4+8:],
		"truncated attr": append([]byte{2, 0, 0, 0}, 0xff, 0, 1, 0),
	} {
		if _, _, err := parseIDAndReply(msg); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestTupleAttrFamily(t *testing.T) {
	if _, err := tupleAttr(nl.CTA_TUPLE_ORIG, unix.AF_INET6, &udpDNAT.Forward); err == nil {
		t.Error("IPv4 tuple accepted for AF_INET6")
	}
	if _, err := tupleAttr(nl.CTA_TUPLE_ORIG, unix.AF_INET, &udp6DNAT.Forward); err == nil {
		t.Error("IPv6 tuple accepted for AF_INET")
	}
	if _, err := tupleAttr(nl.CTA_TUPLE_ORIG, unix.AF_INET6, &udp6DNAT.Forward); err != nil {
		t.Errorf("IPv6 tuple refused: %v", err)
	}
}

// FuzzParseIDAndReply feeds arbitrary kernel messages to the parser: it must never panic,
// and whatever it accepts must re-encode to a tuple it parses identically.
func FuzzParseIDAndReply(f *testing.F) {
	f.Add(entryMsg(7, &udpDNAT.Reverse))
	f.Add([]byte{2, 0, 0, 0, 8, 0, 12, 0, 0, 0, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, msg []byte) {
		id, reply, err := parseIDAndReply(msg)
		if err != nil {
			return
		}
		if reply.SrcIP.To4() == nil || reply.DstIP.To4() == nil {
			return
		}
		id2, reply2, err := parseIDAndReply(entryMsg(id, reply))
		if err != nil || id2 != id || !sameTuple(reply, reply2) {
			t.Fatalf("re-encoding %+v/%d parsed as %+v/%d, %v", reply, id, reply2, id2, err)
		}
	})
}
