//go:build linux

package ipvs

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	utilipvs "k8s.io/net-utils/ipvs"
)

// dump is the whole programmed state as text: virtual and real servers,
// ip set entries, kube-ipvs0's addresses and the iptables rules, for
// comparing two proxiers.
func (e *fakeEnv) dump(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	vss, _ := e.ipvs.GetVirtualServers()
	for _, vs := range vss {
		fmt.Fprintf(&b, "vs %s %s flags=%#x timeout=%d\n", vs, vs.Scheduler, vs.Flags, vs.Timeout)
		rss, _ := e.ipvs.GetRealServers(vs)
		lines := make([]string, 0, len(rss))
		for _, rs := range rss {
			lines = append(lines, fmt.Sprintf("  rs %s weight=%d", rs, rs.Weight))
		}
		sort.Strings(lines)
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	names, _ := e.ipset.ListSets()
	for _, n := range names {
		entries, _ := e.ipset.ListEntries(n)
		fmt.Fprintf(&b, "set %s %s\n", n, strings.Join(entries, " "))
	}
	bound, _ := e.netlink.ListBindAddress(defaultDummyDevice)
	bound = slices.Clone(bound)
	sort.Strings(bound)
	fmt.Fprintf(&b, "kube-ipvs0 %s\n", strings.Join(bound, " "))
	for _, table := range []string{"nat", "filter"} {
		var buf strings.Builder
		var bb = new(bytesBuffer)
		if err := e.ipt.SaveInto(tableName(table), &bb.Buffer); err != nil {
			t.Fatalf("save %s: %v", table, err)
		}
		buf.WriteString(bb.String())
		b.WriteString(buf.String())
	}
	return b.String()
}

func realServersOf(t testing.TB, e *fakeEnv, vs *utilipvs.VirtualServer) []string {
	t.Helper()
	rss, err := e.ipvs.GetRealServers(vs)
	if err != nil {
		t.Fatalf("GetRealServers(%s): %v", vs, err)
	}
	var out []string
	for _, rs := range rss {
		out = append(out, rs.String())
	}
	sort.Strings(out)
	return out
}
