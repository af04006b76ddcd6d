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

package ipset

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestIPSetValidate(t *testing.T) {
	tests := []struct {
		name    string
		set     IPSet
		wantErr string
	}{
		{name: "hash:ip,port v4", set: IPSet{Name: "KUBE-A", SetType: HashIPPort, HashFamily: ProtocolFamilyIPV4, HashSize: 1024, MaxElem: 1024}},
		{name: "hash:ip,port,ip v6", set: IPSet{Name: "KUBE-A", SetType: HashIPPortIP, HashFamily: ProtocolFamilyIPV6, HashSize: 1024, MaxElem: 1024}},
		{name: "hash:ip,port,net", set: IPSet{SetType: HashIPPortNet, HashFamily: ProtocolFamilyIPV4, HashSize: 1, MaxElem: 1}},
		{name: "bitmap:port", set: IPSet{SetType: BitmapPort, PortRange: "30000-32767", HashSize: 1, MaxElem: 1}},
		{name: "bitmap:port reversed range", set: IPSet{SetType: BitmapPort, PortRange: "32767-30000", HashSize: 1, MaxElem: 1}},
		{name: "hash:ip without family is accepted (family checked only for port types)", set: IPSet{SetType: HashIP, HashSize: 1, MaxElem: 1}},
		{name: "bad family", set: IPSet{Name: "S", SetType: HashIPPort, HashFamily: "ipv4", HashSize: 1, MaxElem: 1}, wantErr: `ipset "S": unsupported HashFamily "ipv4"`},
		{name: "bad type", set: IPSet{SetType: "list:set", HashSize: 1, MaxElem: 1}, wantErr: "unsupported SetType"},
		{name: "bitmap range single port", set: IPSet{SetType: BitmapPort, PortRange: "80", HashSize: 1, MaxElem: 1}, wantErr: "invalid PortRange"},
		{name: "bitmap range negative", set: IPSet{SetType: BitmapPort, PortRange: "-1-5", HashSize: 1, MaxElem: 1}, wantErr: "invalid PortRange"},
		{name: "bitmap range too high", set: IPSet{SetType: BitmapPort, PortRange: "1-65536", HashSize: 1, MaxElem: 1}, wantErr: "out of range"},
		{name: "zero hash size", set: IPSet{SetType: HashIP, HashSize: 0, MaxElem: 1}, wantErr: "invalid HashSize 0"},
		{name: "negative maxelem", set: IPSet{SetType: HashIP, HashSize: 1, MaxElem: -1}, wantErr: "invalid MaxElem -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.set.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestValidateName(t *testing.T) {
	for name, ok := range map[string]bool{
		"KUBE-CLUSTER-IP":                    true,
		strings.Repeat("a", MaxNameLength):   true,
		strings.Repeat("a", MaxNameLength+1): false,
		"":                                   false,
		"two words":                          false,
		"line\nbreak":                        false,
		"tab\t":                              false,
	} {
		if err := ValidateName(name); (err == nil) != ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestSetDefaults(t *testing.T) {
	s := IPSet{Name: "X"}
	s.setIPSetDefaults()
	want := IPSet{Name: "X", SetType: HashIPPort, HashFamily: ProtocolFamilyIPV4, HashSize: 1024, MaxElem: 65536, PortRange: DefaultPortRange}
	if s != want {
		t.Errorf("defaults = %+v, want %+v", s, want)
	}
	s = IPSet{Name: "Y", SetType: HashIP, HashFamily: ProtocolFamilyIPV6, HashSize: 64, MaxElem: 10, PortRange: "1-2"}
	before := s
	s.setIPSetDefaults()
	if s != before {
		t.Errorf("defaults overwrote set fields: %+v -> %+v", before, s)
	}
}

func TestEntry(t *testing.T) {
	v4 := &IPSet{Name: "V4", SetType: HashIPPort, HashFamily: ProtocolFamilyIPV4}
	v6 := &IPSet{Name: "V6", SetType: HashIPPort, HashFamily: ProtocolFamilyIPV6}
	bitmap := &IPSet{Name: "BM", SetType: BitmapPort, PortRange: "30000-32767"}
	tests := []struct {
		name       string
		entry      Entry
		set        *IPSet
		wantString string
		wantErr    string
	}{
		{name: "hash:ip", entry: Entry{IP: "198.18.0.1", SetType: HashIP}, set: v4, wantString: "198.18.0.1"},
		{name: "hash:ip v6", entry: Entry{IP: "fd00::1", SetType: HashIP}, set: v6, wantString: "fd00::1"},
		{name: "hash:ip nil set", entry: Entry{IP: "fd00::1", SetType: HashIP}, wantString: "fd00::1"},
		{name: "hash:ip,port defaults protocol to tcp", entry: Entry{IP: "198.18.0.1", Port: 80, SetType: HashIPPort}, set: v4, wantString: "198.18.0.1,tcp:80"},
		{name: "hash:ip,port udp", entry: Entry{IP: "198.18.0.1", Port: 53, Protocol: ProtocolUDP, SetType: HashIPPort}, set: v4, wantString: "198.18.0.1,udp:53"},
		{name: "hash:ip,port sctp", entry: Entry{IP: "198.18.0.1", Port: 9, Protocol: ProtocolSCTP, SetType: HashIPPort}, set: v4, wantString: "198.18.0.1,sctp:9"},
		{name: "hash:ip,port,ip", entry: Entry{IP: "198.18.0.1", Port: 80, Protocol: ProtocolTCP, IP2: "198.18.0.1", SetType: HashIPPortIP}, set: v4, wantString: "198.18.0.1,tcp:80,198.18.0.1"},
		{name: "hash:ip,port,net", entry: Entry{IP: "198.18.0.1", Port: 80, Protocol: ProtocolTCP, Net: "198.18.0.0/15", SetType: HashIPPortNet}, set: v4, wantString: "198.18.0.1,tcp:80,198.18.0.0/15"},
		{name: "bitmap:port", entry: Entry{Port: 30001, SetType: BitmapPort}, set: bitmap, wantString: "30001"},
		{name: "bitmap:port at range ends", entry: Entry{Port: 32767, SetType: BitmapPort}, set: bitmap, wantString: "32767"},
		{name: "leading zeros accepted (sloppy parse)", entry: Entry{IP: "198.018.000.001", SetType: HashIP}, set: v4, wantString: "198.018.000.001"},

		{name: "negative port", entry: Entry{IP: "198.18.0.1", Port: -1, SetType: HashIPPort}, set: v4, wantErr: "port -1 out of range"},
		{name: "port too high", entry: Entry{IP: "198.18.0.1", Port: 65536, SetType: HashIPPort}, set: v4, wantErr: "port 65536 out of range"},
		{name: "bad ip", entry: Entry{IP: "198.18.0", SetType: HashIP}, set: v4, wantErr: `invalid IP "198.18.0"`},
		{name: "empty ip", entry: Entry{SetType: HashIPPort, Port: 1}, set: v4, wantErr: `invalid IP ""`},
		{name: "bad protocol", entry: Entry{IP: "198.18.0.1", Port: 80, Protocol: "icmp", SetType: HashIPPort}, set: v4, wantErr: `unsupported protocol "icmp"`},
		{name: "v6 ip in v4 set", entry: Entry{IP: "fd00::1", Port: 80, SetType: HashIPPort}, set: v4, wantErr: "does not belong to family inet"},
		{name: "v4 ip in v6 set", entry: Entry{IP: "198.18.0.1", Port: 80, SetType: HashIPPort}, set: v6, wantErr: "does not belong to family inet6"},
		{name: "bad ip2", entry: Entry{IP: "198.18.0.1", Port: 80, IP2: "x", SetType: HashIPPortIP}, set: v4, wantErr: `invalid second IP "x"`},
		{name: "ip2 wrong family", entry: Entry{IP: "198.18.0.1", Port: 80, IP2: "fd00::1", SetType: HashIPPortIP}, set: v4, wantErr: "does not belong"},
		{name: "bad net", entry: Entry{IP: "198.18.0.1", Port: 80, Net: "198.18.0.0", SetType: HashIPPortNet}, set: v4, wantErr: `invalid net "198.18.0.0"`},
		{name: "net wrong family", entry: Entry{IP: "198.18.0.1", Port: 80, Net: "fd00::/8", SetType: HashIPPortNet}, set: v4, wantErr: "does not belong"},
		{name: "bitmap port below range", entry: Entry{Port: 29999, SetType: BitmapPort}, set: bitmap, wantErr: "outside range 30000-32767"},
		{name: "bitmap without set", entry: Entry{Port: 30000, SetType: BitmapPort}, wantErr: "needs its set"},
		{name: "bitmap set with bad range", entry: Entry{Port: 1, SetType: BitmapPort}, set: &IPSet{SetType: BitmapPort, PortRange: "a-b"}, wantErr: "invalid PortRange"},
		{name: "unknown type", entry: Entry{IP: "198.18.0.1", SetType: "list:set"}, set: v4, wantErr: "unsupported set type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.entry
			err := e.Check(tc.set)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, errInvalidEntry) {
					t.Fatalf("Check() = %v, want error containing %q", err, tc.wantErr)
				}
				e2 := tc.entry
				if e2.Validate(tc.set) {
					t.Errorf("Validate() = true for an entry Check rejects")
				}
				return
			}
			if err != nil {
				t.Fatalf("Check() = %v, want nil", err)
			}
			if got := e.String(); got != tc.wantString {
				t.Errorf("String() = %q, want %q", got, tc.wantString)
			}
			e2 := tc.entry
			if !e2.Validate(tc.set) {
				t.Errorf("Validate() = false for an entry Check accepts")
			}
		})
	}
}

func TestParsePortRange(t *testing.T) {
	tests := []struct {
		in         string
		begin, end int
		wantErr    bool
	}{
		{in: "", begin: 0, end: 65535},
		{in: "0-65535", begin: 0, end: 65535},
		{in: "100-50", begin: 50, end: 100},
		{in: "7-7", begin: 7, end: 7},
		{in: "7", wantErr: true},
		{in: "a-1", wantErr: true},
		{in: "1-b", wantErr: true},
		{in: "1-2-3", wantErr: true},
		{in: "-5", wantErr: true},
		{in: "1-70000", wantErr: true},
	}
	for _, tc := range tests {
		b, e, err := parsePortRange(tc.in)
		if (err != nil) != tc.wantErr || (err == nil && (b != tc.begin || e != tc.end)) {
			t.Errorf("parsePortRange(%q) = %d, %d, %v; want %d, %d, error %v", tc.in, b, e, err, tc.begin, tc.end, tc.wantErr)
		}
	}
}

func TestIsNotFoundError(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("ipset v7.17: The set with the given name does not exist"), true},
		{fmt.Errorf("wrapped: %w", errors.New("Kernel error received: element is missing")), true},
		{errors.New("ipset v7.17: Element cannot be deleted from the set: it's not added"), true},
		{errors.New("ipset v7.17: Element cannot be added to the set: it's already added"), false},
		{errors.New("exec: ipset not found"), false},
	}
	for _, tc := range tests {
		if got := IsNotFoundError(tc.err); got != tc.want {
			t.Errorf("IsNotFoundError(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

const listOutput = `Name: KUBE-CLUSTER-IP
Type: hash:ip,port
Revision: 7
Header: family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x7ea774a7
Size in memory: 264
References: 1
Number of entries: 2
Members:
198.18.10.1,tcp:80
198.18.10.2,udp:53
`

func TestParseMembers(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want []string
	}{
		{name: "members", out: listOutput, want: []string{"198.18.10.1,tcp:80", "198.18.10.2,udp:53"}},
		{name: "empty set", out: strings.SplitAfter(listOutput, "Members:\n")[0], want: []string{}},
		{name: "no members header", out: "Name: X\n", want: []string{}},
		{name: "members header last without newline", out: "Name: X\nMembers:", want: []string{}},
		{name: "blank lines and CRs ignored", out: "Members:\n\n10.0.0.1\r\n\n", want: []string{"10.0.0.1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := parseMembers([]byte(tc.out))
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || got == nil {
				t.Errorf("parseMembers = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	tests := []struct {
		out, want string
		wantErr   bool
	}{
		{out: "ipset v7.17, protocol version: 7\n", want: "v7.17"},
		{out: "ipset v6.29, protocol version: 6\n", want: "v6.29"},
		{out: "ipset 7\n", wantErr: true},
	}
	for _, tc := range tests {
		got, err := parseVersion([]byte(tc.out))
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("parseVersion(%q) = %q, %v; want %q, error %v", tc.out, got, err, tc.want, tc.wantErr)
		}
	}
}

// FuzzParseMembers checks that parsing arbitrary "ipset list" output never panics and never
// returns blank or padded members.
func FuzzParseMembers(f *testing.F) {
	f.Add(listOutput)
	f.Add("Members:\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, out string) {
		for _, m := range parseMembers([]byte(out)) {
			if m == "" || strings.TrimSpace(m) != m {
				t.Fatalf("parseMembers(%q) returned member %q", out, m)
			}
		}
	})
}

// FuzzParsePortRange checks that an accepted range is ordered and within port bounds.
func FuzzParsePortRange(f *testing.F) {
	for _, s := range []string{"0-65535", "5-1", "", "x", "1--2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, e, err := parsePortRange(s)
		if err != nil {
			return
		}
		if b < 0 || e > 65535 || b > e {
			t.Fatalf("parsePortRange(%q) = %d, %d", s, b, e)
		}
	})
}
