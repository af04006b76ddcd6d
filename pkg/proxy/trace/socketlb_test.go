package trace

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestNewSocketLB(t *testing.T) {
	pod := Packet{Src: netip.MustParseAddr("10.244.1.5"), Dst: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: "tcp", From: FromPod}
	with := func(f func(*Packet)) Packet { p := pod; f(&p); return p }
	eps := []netip.AddrPort{netip.MustParseAddrPort("10.1.0.1:8080"), netip.MustParseAddrPort("10.1.0.2:8080")}
	for _, tc := range []struct {
		name       string
		pk         Packet
		attached   bool
		found      bool
		eps        []netip.AddrPort
		reject     bool
		affinity   time.Duration
		applies    bool
		translated bool
		text       []string
	}{
		{name: "translated", pk: pod, attached: true, found: true, eps: eps, affinity: 3 * time.Hour, applies: true, translated: true,
			text: []string{"10.96.0.10:80/tcp", "-> 10.1.0.1:8080  50.0%", "-> 10.1.0.2:8080  50.0%", "3h0m0s", "no DNAT"}},
		{name: "from the host", pk: with(func(p *Packet) { p.From = FromHost }), attached: true, found: true, eps: eps[:1], applies: true, translated: true,
			text: []string{"-> 10.1.0.1:8080  100.0%"}},
		{name: "no endpoints rejects", pk: pod, attached: true, found: true, reject: true, applies: true, translated: true,
			text: []string{"ECONNREFUSED"}},
		{name: "not in the maps", pk: pod, attached: true, applies: true, text: []string{"hold no entry for 10.96.0.10:80/tcp"}},
		{name: "none usable here", pk: pod, attached: true, found: true, applies: true, text: []string{"Local traffic policy"}},
		{name: "maps without programs", pk: pod, found: true, eps: eps, applies: true, text: []string{"no program link"}},
		{name: "from another host", pk: with(func(p *Packet) { p.From = FromExternal }), attached: true, found: true, eps: eps,
			text: []string{"another host"}},
		{name: "sctp", pk: with(func(p *Packet) { p.Protocol = "sctp" }), attached: true, text: []string{"SCTP"}},
		{name: "ipv6", pk: with(func(p *Packet) { p.Src, p.Dst = netip.MustParseAddr("fd00::5"), netip.MustParseAddr("fd00:96::10") }),
			attached: true, found: true, eps: []netip.AddrPort{netip.MustParseAddrPort("[fd00::1]:8080")}, applies: true, translated: true,
			text: []string{"[fd00:96::10]:80/tcp", "-> [fd00::1]:8080"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSocketLB(tc.pk, "/sys/fs/bpf/x", tc.attached, tc.found, tc.eps, tc.reject, tc.affinity)
			if s.Applies != tc.applies || s.Translated != tc.translated {
				t.Errorf("applies %t translated %t, want %t %t (%s)", s.Applies, s.Translated, tc.applies, tc.translated, s.Why)
			}
			if !tc.translated && len(s.Endpoints) > 0 {
				t.Errorf("endpoints %v on an untranslated answer", s.Endpoints)
			}
			var b strings.Builder
			if err := s.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.text {
				if !strings.Contains(b.String(), w) {
					t.Errorf("text lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
