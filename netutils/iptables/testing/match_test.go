package testing

import "testing"

func TestMatchesIP(t *testing.T) {
	for _, tc := range []struct {
		v     *IPTablesValue
		ip    string
		want  bool
		isErr bool
	}{
		{nil, "1.2.3.4", true, false},
		{&IPTablesValue{Value: "10.0.0.0/8"}, "10.1.2.3", true, false},
		{&IPTablesValue{Value: "10.0.0.0/8"}, "11.1.2.3", false, false},
		{&IPTablesValue{Negated: true, Value: "10.0.0.0/8"}, "11.1.2.3", true, false},
		{&IPTablesValue{Value: "172.30.0.41/32"}, "172.30.0.41", true, false},
		{&IPTablesValue{Value: "172.30.0.41"}, "172.30.0.42", false, false},
		{&IPTablesValue{Value: "10.1.2.3/8"}, "10.9.9.9", true, false}, // host bits are ignored, as iptables does
		{&IPTablesValue{Value: "1.1.1.1,2.2.2.0/24"}, "2.2.2.7", true, false},
		{&IPTablesValue{Value: "fd00::/8"}, "fd00::1", true, false},
		{&IPTablesValue{Value: "fd00::/8"}, "10.0.0.1", false, false},
		{&IPTablesValue{Value: "bogus"}, "10.0.0.1", false, true},
		{&IPTablesValue{Value: "10.0.0.0/8"}, "bogus", false, true},
	} {
		got, err := tc.v.MatchesIP(tc.ip)
		if (err != nil) != tc.isErr || (err == nil && got != tc.want) {
			t.Errorf("%v.MatchesIP(%q) = %v, %v; want %v (error %v)", tc.v, tc.ip, got, err, tc.want, tc.isErr)
		}
	}
}

func TestMatchesPort(t *testing.T) {
	for _, tc := range []struct {
		v     *IPTablesValue
		port  int
		want  bool
		isErr bool
	}{
		{nil, 80, true, false},
		{&IPTablesValue{Value: "80"}, 80, true, false},
		{&IPTablesValue{Value: "80"}, 81, false, false},
		{&IPTablesValue{Negated: true, Value: "80"}, 81, true, false},
		{&IPTablesValue{Value: "30000:32767"}, 31000, true, false},
		{&IPTablesValue{Value: "30000:"}, 65000, true, false},
		{&IPTablesValue{Value: ":1024"}, 22, true, false},
		{&IPTablesValue{Value: "53,80,443:445"}, 444, true, false},
		{&IPTablesValue{Value: "53,80,443:445"}, 446, false, false},
		{&IPTablesValue{Value: "http"}, 80, false, true},
	} {
		got, err := tc.v.MatchesPort(tc.port)
		if (err != nil) != tc.isErr || (err == nil && got != tc.want) {
			t.Errorf("%v.MatchesPort(%d) = %v, %v; want %v (error %v)", tc.v, tc.port, got, err, tc.want, tc.isErr)
		}
	}
}

func TestMatchesInterfaceAndList(t *testing.T) {
	for _, tc := range []struct {
		v    *IPTablesValue
		name string
		want bool
	}{
		{nil, "eth0", true},
		{&IPTablesValue{Value: "eth0"}, "eth0", true},
		{&IPTablesValue{Value: "eth0"}, "eth01", false},
		{&IPTablesValue{Value: "veth+"}, "veth1234", true},
		{&IPTablesValue{Negated: true, Value: "veth+"}, "eth0", true},
		{&IPTablesValue{Negated: true, Value: "veth+"}, "veth0", false},
	} {
		if got := tc.v.MatchesInterface(tc.name); got != tc.want {
			t.Errorf("%v.MatchesInterface(%q) = %v, want %v", tc.v, tc.name, got, tc.want)
		}
	}
	states := &IPTablesValue{Value: "RELATED,ESTABLISHED"}
	if !states.MatchesList("ESTABLISHED") || states.MatchesList("NEW") {
		t.Errorf("MatchesList on %v is wrong", states)
	}
	notInvalid := &IPTablesValue{Negated: true, Value: "INVALID"}
	if !notInvalid.MatchesList("NEW") || notInvalid.MatchesList("INVALID") {
		t.Errorf("MatchesList on %v is wrong", notInvalid)
	}
}

func TestMarks(t *testing.T) {
	for _, tc := range []struct {
		rule   string
		before uint32
		after  uint32
		// check is the --mark of the rule evaluated on after, if the rule has one.
		check bool
	}{
		{rule: `-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000`, before: 0x1, after: 0x4001},
		{rule: `-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000`, before: 0x1, after: 0x4001},
		{rule: `-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000`, before: 0x4001, after: 0x1},
		{rule: `-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0`, before: 0x4001, after: 0x1},
		{rule: `-A X -j MARK --set-mark 0x10/0xf0`, before: 0xff, after: 0x1f},
		{rule: `-A X -j MARK --set-mark 7`, before: 0xff, after: 0x7},
		{rule: `-A X -j MARK --and-mark 0xf`, before: 0xff, after: 0xf},
		{rule: `-A X -m mark --mark 0x4000/0x4000 -j ACCEPT`, before: 0x4001, after: 0x4001, check: true},
		{rule: `-A X -m mark ! --mark 0x4000/0x4000 -j RETURN`, before: 0x4001, after: 0x4001, check: false},
		{rule: `-A X -m mark --mark 0x1 -j RETURN`, before: 0x4001, after: 0x4001, check: false},
	} {
		r := mustParseRule(t, tc.rule)
		got, err := r.ApplyMark(tc.before)
		if err != nil || got != tc.after {
			t.Errorf("%q.ApplyMark(%#x) = %#x, %v; want %#x", tc.rule, tc.before, got, err, tc.after)
		}
		if r.MarkCheck != nil {
			if ok, err := r.MarkCheck.MatchesMark(got); err != nil || ok != tc.check {
				t.Errorf("%q --mark on %#x = %v, %v; want %v", tc.rule, got, ok, err, tc.check)
			}
		}
	}
	if _, err := mustParseRule(t, `-A X -j MARK --set-xmark nope`).ApplyMark(0); err == nil {
		t.Errorf("want an error for a bad mark")
	}
	if _, err := mustParseRule(t, `-A X -j MARK`).ApplyMark(0); err == nil {
		t.Errorf("want an error for a MARK rule without a mark")
	}
}
