package trace

import (
	"strings"
	"testing"
)

// Live rules that balance a Service exactly as the computed ones do are in
// sync, however their endpoint maps are laid out: kube-proxy's incremental
// syncs move a chain to other slots (another numgen offset) when its
// endpoint count grows, leave freed slots behind, and every full sync writes
// maps of a new generation. Only a different share of packets per endpoint
// is a difference.
func TestCompareNFTNumgenLayout(t *testing.T) {
	const rule = "add rule ip kube-proxy service-AXK6CI2C-demo/web/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 2 offset 0 map @endpoints-0-tcp-12\n"
	const elems = "add element ip kube-proxy endpoints-0-tcp-12 { 0 : 198.19.1.10 . 8080 }\nadd element ip kube-proxy endpoints-0-tcp-12 { 1 : 198.19.2.10 . 8080 }\n"
	const mapDecl = "add map ip kube-proxy endpoints-0-tcp-12 { typeof numgen random mod 1 : ip daddr . tcp dport ; comment \"service endpoints by slot (see the rules using it)\" ; }\n"
	base := readTestdata(t, "cluster-node1.nft")
	for _, s := range []string{rule, elems, mapDecl} {
		if !strings.Contains(base, s) {
			t.Fatalf("testdata/cluster-node1.nft no longer holds %q", s)
		}
	}
	// relayout replaces demo/web's balancing rule and its map's elements.
	relayout := func(newRule, newElems string) string {
		s := strings.Replace(base, rule, newRule, 1)
		return strings.Replace(s, elems, newElems, 1)
	}
	for _, tc := range []struct {
		name string
		live string
		// want is a part of the one difference expected; "" for none.
		want string
	}{
		{
			name: "same layout",
			live: base,
		},
		{
			name: "other offset, endpoints swapped, stale slots left behind",
			live: relayout(
				"add rule ip kube-proxy service-AXK6CI2C-demo/web/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 2 offset 4 map @endpoints-0-tcp-12\n",
				"add element ip kube-proxy endpoints-0-tcp-12 { 0 : 198.19.1.99 . 8080 }\n"+
					"add element ip kube-proxy endpoints-0-tcp-12 { 4 : 198.19.2.10 . 8080 }\n"+
					"add element ip kube-proxy endpoints-0-tcp-12 { 5 : 198.19.1.10 . 8080 }\n"),
		},
		{
			name: "a map of another generation",
			live: strings.ReplaceAll(base, "endpoints-0-tcp-12", "endpoints-7-tcp-12"),
		},
		{
			name: "more slots, same shares",
			live: relayout(
				"add rule ip kube-proxy service-AXK6CI2C-demo/web/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 4 offset 8 map @endpoints-0-tcp-12\n",
				"add element ip kube-proxy endpoints-0-tcp-12 { 8 : 198.19.1.10 . 8080 }\n"+
					"add element ip kube-proxy endpoints-0-tcp-12 { 9 : 198.19.2.10 . 8080 }\n"+
					"add element ip kube-proxy endpoints-0-tcp-12 { 10 : 198.19.2.10 . 8080 }\n"+
					"add element ip kube-proxy endpoints-0-tcp-12 { 11 : 198.19.1.10 . 8080 }\n"),
		},
		{
			name: "another endpoint",
			live: relayout(
				"add rule ip kube-proxy service-AXK6CI2C-demo/web/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 2 offset 4 map @endpoints-0-tcp-12\n",
				"add element ip kube-proxy endpoints-0-tcp-12 { 4 : 198.19.2.10 . 8080 }\n"+
					"add element ip kube-proxy endpoints-0-tcp-12 { 5 : 198.19.1.99 . 8080 }\n"),
			want: "service-AXK6CI2C-demo/web/tcp/http rule",
		},
		{
			name: "other shares",
			live: relayout(
				"add rule ip kube-proxy service-AXK6CI2C-demo/web/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 3 offset 0 map @endpoints-0-tcp-12\n",
				elems+"add element ip kube-proxy endpoints-0-tcp-12 { 2 : 198.19.2.10 . 8080 }\n"),
			want: "service-AXK6CI2C-demo/web/tcp/http rule",
		},
		{
			name: "an empty slot",
			live: relayout(
				"add rule ip kube-proxy service-AXK6CI2C-demo/web/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 3 offset 0 map @endpoints-0-tcp-12\n",
				elems),
			want: "service-AXK6CI2C-demo/web/tcp/http rule",
		},
		{
			name: "affinity balancing by another numgen value",
			live: strings.Replace(base, "numgen random mod 2 0 goto endpoint-YVAMPADO", "numgen random mod 2 1 goto endpoint-YVAMPADO", 1),
		},
		{
			name: "affinity balancing with another share",
			live: strings.Replace(base, "numgen random mod 2 0 goto endpoint-YVAMPADO", "numgen random mod 3 0 goto endpoint-YVAMPADO", 1),
			want: "service-FY5PMXPG-kube-system/kube-dns/udp/dns rule",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expected, err := ParseNFTScript(base, "kube-proxy")
			if err != nil {
				t.Fatal(err)
			}
			live, err := ParseNFTScript(tc.live, "kube-proxy")
			if err != nil {
				t.Fatal(err)
			}
			d := CompareNFT(live, expected, 0)
			switch {
			case tc.want == "" && len(d) != 0:
				t.Errorf("%d differences for the same balancing: %v", len(d), d)
			case tc.want != "" && (len(d) != 1 || !strings.Contains(d[0].Where, tc.want)):
				t.Errorf("want one difference at %q, got %v", tc.want, d)
			}
		})
	}
}
