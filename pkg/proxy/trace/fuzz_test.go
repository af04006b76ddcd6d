package trace

import (
	"net/netip"
	"os"
	"testing"
)

// The parsers read what a node hands them; whatever that is, they return
// a ruleset or an error, and tracing the ruleset returns a result or an
// error: never a panic, never a hang.

var fuzzPackets = []Packet{
	pkt(FromPod, "veth1", "10.1.0.8", "10.0.0.1", 80, "tcp"),
	pkt(FromExternal, "eth0", "192.168.0.1", "192.168.0.10", 30080, "udp"),
	pkt(FromHost, "", "192.168.0.10", "10.96.0.10", 53, "udp"),
	pkt(FromPod, "veth1", "fd00::8", "fd00::1", 80, "tcp"),
}

// cheapLimits makes a hostile input (jumps in a loop, branches of
// branches) fail fast: the fuzzer then spends its time on parsing.
func cheapLimits(f *testing.F) {
	paths, steps := maxPaths, maxSteps
	maxPaths, maxSteps = 1<<8, 1<<12
	f.Cleanup(func() { maxPaths, maxSteps = paths, steps })
}

func fuzzTrace(t *testing.T, tr Tracer) {
	for _, pk := range fuzzPackets {
		_, _ = tr.Trace(pk, &Node{LocalAddrs: []netip.Addr{netip.MustParseAddr("192.168.0.10")}})
	}
}

func addSeed(f *testing.F, name string) {
	if b, err := os.ReadFile("testdata/" + name); err == nil {
		f.Add(b)
	}
}

func FuzzParseIPTablesSave(f *testing.F) {
	addSeed(f, "cluster-node1.iptables-save")
	f.Add([]byte(iptBase))
	f.Add([]byte("*nat\n:A - [0:0]\n-A A -j A\nCOMMIT\n"))
	f.Add([]byte("*filter\n:INPUT DROP [0:0]\n[1:2] -A INPUT ! -s 1.2.3.4/33 -m mark --mark 0x1/0xzz -j MARK --set-xmark 0x1\n"))
	cheapLimits(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		ipt, err := ParseIPTablesSave(string(data))
		if err != nil {
			return
		}
		fuzzTrace(t, ipt)
		CompareIPTables(ipt, ipt, 3)
	})
}

func FuzzParseNFTJSON(f *testing.F) {
	addSeed(f, "cluster-node1.nft.json")
	f.Add([]byte(`{"nftables": [{"table": {"family": "ip", "name": "t"}}, {"chain": {"family": "ip", "table": "t", "name": "c", "type": "filter", "hook": "prerouting", "prio": "dstnat - 5"}}, {"rule": {"family": "ip", "table": "t", "chain": "c", "expr": [{"jump": {"target": "c"}}]}}]}`))
	f.Add([]byte(`{"nftables": [{"map": {"family": "ip", "table": "t", "name": "m", "map": "verdict", "elem": [[{"prefix": {"addr": "1.2.3.0", "len": 99}}, {"goto": {"target": "x"}}]]}}]}`))
	cheapLimits(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		nft, err := ParseNFTJSON(data, "t")
		if err != nil {
			return
		}
		fuzzTrace(t, nft)
		CompareNFT(nft, nft, 3)
	})
}

func FuzzParseNFTScript(f *testing.F) {
	addSeed(f, "cluster-node1.nft")
	f.Add([]byte(nftBase))
	f.Add([]byte("add table ip t\nadd chain ip t c { type nat hook output priority -100 ; }\nadd rule ip t c numgen random mod 0 vmap { 0 : goto c }\n"))
	f.Add([]byte("add table ip t\nadd chain ip t c { type filter hook prerouting priority raw ; }\nadd rule ip t c jump c\n"))
	cheapLimits(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		nft, err := ParseNFTScript(string(data), "t")
		if err != nil {
			return
		}
		fuzzTrace(t, nft)
		CompareNFT(nft, nft, 3)
	})
}

func FuzzParseIPVSAdmSave(f *testing.F) {
	f.Add([]byte("-A -t 10.96.0.10:80 -s rr\n-a -t 10.96.0.10:80 -r 198.19.1.10:8080 -m -w 1\n-A -u [fd00::1]:53 -s sh -b sh-port -p 10800\n-A -f 7 -s rr\n"))
	f.Add([]byte("-a -t 10.96.0.10:80 -r 198.19.1.10:8080\n-A -t\n-A -s rr -p x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		vss, err := ParseIPVSAdmSave(string(data))
		if err != nil {
			return
		}
		for _, vs := range vss {
			_ = vs.String()
			for _, rs := range vs.RealServers {
				if rs.Weight < 0 {
					t.Errorf("negative weight %d accepted", rs.Weight)
				}
			}
		}
	})
}
