package vm

import (
	"strings"
	"testing"
)

// TestGoTestLog feeds the parser console output as the guest prints it: go test -v
// lines, VMMODE markers, kernel messages in between, and checks what it attributes to
// which mode and test.
func TestGoTestLog(t *testing.T) {
	console := `VMLOG loaded 227 modules in 3.1s
VMMODE ipvs
=== RUN   TestDatapath
=== RUN   TestDatapath/ipvs
=== RUN   TestDatapath/ipvs/ClusterIP
    datapath_test.go:135: TCP from pod answered by b1 (client 198.18.129.50)
=== RUN   TestDatapath/ipvs/NodePort
    datapath_test.go:171: connecting from ext to 198.18.0.1:30080: i/o timeout
[   67.110639] IPVS: rr: TCP 198.19.0.18:80 - no destination available
=== NAME  TestDatapath/ipvs
    kubeproxy_test.go:119: kube-proxy output (last 8kB):
        I1129 01:27:21.168008     422 utils.go:173] "Changed sysctl"
--- FAIL: TestDatapath (63.56s)
    --- FAIL: TestDatapath/ipvs (63.55s)
        --- PASS: TestDatapath/ipvs/ClusterIP (0.66s)
        --- FAIL: TestDatapath/ipvs/NodePort (2.06s)
FAIL
VMCHECK e2e/ipvs FAIL exit=1 seconds=92.7
VMMODE nftables
=== RUN   TestDatapath
=== RUN   TestDatapath/nftables
    modes_test.go:110: nftables mode needs nft: exec: "nft": executable file not found in $PATH
--- SKIP: TestDatapath (0.00s)
    --- SKIP: TestDatapath/nftables (0.00s)
`
	l := newGoTestLog()
	for _, line := range strings.Split(console, "\n") {
		l.line(line)
	}
	type want struct {
		name, status, output string
	}
	for mode, exp := range map[string][]want{
		"ipvs": {
			{"TestDatapath/ipvs/ClusterIP", "PASS", "TCP from pod answered by b1"},
			{"TestDatapath/ipvs/NodePort", "FAIL", "i/o timeout"},
			{"TestDatapath/ipvs", "FAIL", "kube-proxy output"},
			{"TestDatapath", "FAIL", ""},
		},
		"nftables": {
			{"TestDatapath/nftables", "SKIP", "needs nft"},
			{"TestDatapath", "SKIP", ""},
		},
	} {
		got := l.results(mode)
		byName := map[string]goTestResult{}
		for _, r := range got {
			byName[r.Name] = r
		}
		if len(got) != len(exp) {
			t.Errorf("mode %s: %d results %+v, want %d", mode, len(got), got, len(exp))
		}
		for _, e := range exp {
			r, ok := byName[e.name]
			if !ok {
				t.Errorf("mode %s: no result for %s", mode, e.name)
				continue
			}
			if r.Status != e.status || !strings.Contains(strings.Join(r.Output, "\n"), e.output) {
				t.Errorf("mode %s: %s = %s %q, want %s with output containing %q", mode, e.name, r.Status, r.Output, e.status, e.output)
			}
		}
	}
	ipvs := l.results("ipvs")
	for _, r := range ipvs {
		if leaf := !r.hasFailedChild(ipvs); r.Status == "FAIL" && leaf != (r.Name == "TestDatapath/ipvs/NodePort") {
			t.Errorf("%s: leaf failure = %v; only the NodePort case is a leaf", r.Name, leaf)
		}
	}
}
