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
	"io"
	"strings"
	"testing"

	utilexec "k8s.io/utils/exec"
	fakeexec "k8s.io/utils/exec/testing"
)

// result is one scripted ipset run.
type result struct {
	out  string
	exit int // non-zero makes the run fail with that exit status
}

// scripted returns an exec that answers runs in order with results and records each run's
// argv and stdin.
func scripted(t *testing.T, results ...result) (*fakeexec.FakeExec, *[][]string, *[]string) {
	t.Helper()
	var argvs [][]string
	var stdins []string
	fe := &fakeexec.FakeExec{}
	for _, r := range results {
		cmd := &fakeexec.FakeCmd{}
		cmd.CombinedOutputScript = []fakeexec.FakeAction{func() ([]byte, []byte, error) {
			argvs = append(argvs, cmd.Argv)
			in := ""
			if cmd.Stdin != nil {
				b, _ := io.ReadAll(cmd.Stdin)
				in = string(b)
			}
			stdins = append(stdins, in)
			var err error
			if r.exit != 0 {
				err = &fakeexec.FakeExitError{Status: r.exit}
			}
			return []byte(r.out), nil, err
		}}
		fe.CommandScript = append(fe.CommandScript, func(c string, args ...string) utilexec.Cmd {
			return fakeexec.InitFakeCmd(cmd, c, args...)
		})
	}
	t.Cleanup(func() {
		if fe.CommandCalls != len(results) {
			t.Errorf("ran ipset %d times, scripted %d", fe.CommandCalls, len(results))
		}
	})
	return fe, &argvs, &stdins
}

func TestRunner(t *testing.T) {
	notExist := "ipset v7.17: The set with the given name does not exist\n"
	tests := []struct {
		name     string
		results  []result
		call     func(Interface) (any, error)
		wantArgv []string
		want     any
		wantErr  string
		notFound bool
	}{
		{
			name:     "create with defaults",
			results:  []result{{}},
			call:     func(r Interface) (any, error) { return nil, r.CreateSet(&IPSet{Name: "KUBE-A"}, false) },
			wantArgv: []string{"ipset", "create", "KUBE-A", "hash:ip,port", "family", "inet", "hashsize", "1024", "maxelem", "65536"},
		},
		{
			name:    "create hash:ip v6 ignoring existing",
			results: []result{{}},
			call: func(r Interface) (any, error) {
				return nil, r.CreateSet(&IPSet{Name: "KUBE-6", SetType: HashIP, HashFamily: ProtocolFamilyIPV6, HashSize: 64, MaxElem: 128}, true)
			},
			wantArgv: []string{"ipset", "create", "KUBE-6", "hash:ip", "family", "inet6", "hashsize", "64", "maxelem", "128", "-exist"},
		},
		{
			name:    "create bitmap",
			results: []result{{}},
			call: func(r Interface) (any, error) {
				return nil, r.CreateSet(&IPSet{Name: "P", SetType: BitmapPort, PortRange: "1-100"}, false)
			},
			wantArgv: []string{"ipset", "create", "P", "bitmap:port", "range", "1-100"},
		},
		{
			name:    "create invalid set runs nothing",
			call:    func(r Interface) (any, error) { return nil, r.CreateSet(&IPSet{Name: "B", HashFamily: "x"}, false) },
			wantErr: `unsupported HashFamily "x"`,
		},
		{
			name:    "create with too long name runs nothing",
			call:    func(r Interface) (any, error) { return nil, r.CreateSet(&IPSet{Name: strings.Repeat("n", 32)}, false) },
			wantErr: "longer than 31",
		},
		{
			name:     "create failure carries output",
			results:  []result{{out: "ipset v7.17: Set cannot be created: set with the same name already exists\n", exit: 1}},
			call:     func(r Interface) (any, error) { return nil, r.CreateSet(&IPSet{Name: "KUBE-A"}, false) },
			wantArgv: []string{"ipset", "create", "KUBE-A", "hash:ip,port", "family", "inet", "hashsize", "1024", "maxelem", "65536"},
			wantErr:  `creating ipset "KUBE-A": ipset create KUBE-A hash:ip,port family inet hashsize 1024 maxelem 65536: exit 1 (ipset v7.17: Set cannot be created`,
		},
		{
			name: "nil set is an error, not a panic",
			call: func(r Interface) (any, error) {
				return nil, errors.Join(r.CreateSet(nil, false), r.AddEntry("1.2.3.4", nil, false))
			},
			wantErr: "nil set",
		},
		{
			name:     "add",
			results:  []result{{}},
			call:     func(r Interface) (any, error) { return nil, r.AddEntry("198.18.0.1,tcp:80", &IPSet{Name: "S"}, true) },
			wantArgv: []string{"ipset", "add", "S", "198.18.0.1,tcp:80", "-exist"},
		},
		{
			name:     "del missing set is not-found",
			results:  []result{{out: notExist, exit: 1}},
			call:     func(r Interface) (any, error) { return nil, r.DelEntry("198.18.0.1", "S") },
			wantArgv: []string{"ipset", "del", "S", "198.18.0.1"},
			wantErr:  `deleting entry "198.18.0.1" from ipset "S"`,
			notFound: true,
		},
		{
			name:     "test present",
			results:  []result{{out: "Warning: 198.18.0.1 is in set S.\n"}},
			call:     func(r Interface) (any, error) { return r.TestEntry("198.18.0.1", "S") },
			wantArgv: []string{"ipset", "test", "S", "198.18.0.1"},
			want:     true,
		},
		{
			name:     "test absent, ipset 7 exit status 1",
			results:  []result{{out: "198.18.0.2 is NOT in set S.\n", exit: 1}},
			call:     func(r Interface) (any, error) { return r.TestEntry("198.18.0.2", "S") },
			wantArgv: []string{"ipset", "test", "S", "198.18.0.2"},
			want:     false,
		},
		{
			name:     "test absent, old ipset exit status 0",
			results:  []result{{out: "198.18.0.2 is NOT in set S.\n"}},
			call:     func(r Interface) (any, error) { return r.TestEntry("198.18.0.2", "S") },
			wantArgv: []string{"ipset", "test", "S", "198.18.0.2"},
			want:     false,
		},
		{
			name:     "test on missing set is an error",
			results:  []result{{out: notExist, exit: 1}},
			call:     func(r Interface) (any, error) { return r.TestEntry("198.18.0.2", "S") },
			wantArgv: []string{"ipset", "test", "S", "198.18.0.2"},
			want:     false,
			wantErr:  "testing entry",
			notFound: true,
		},
		{
			name:     "flush",
			results:  []result{{}},
			call:     func(r Interface) (any, error) { return nil, r.FlushSet("S") },
			wantArgv: []string{"ipset", "flush", "S"},
		},
		{
			name:     "destroy",
			results:  []result{{}},
			call:     func(r Interface) (any, error) { return nil, r.DestroySet("S") },
			wantArgv: []string{"ipset", "destroy", "S"},
		},
		{
			name:     "destroy all",
			results:  []result{{}},
			call:     func(r Interface) (any, error) { return nil, r.DestroyAllSets() },
			wantArgv: []string{"ipset", "destroy"},
		},
		{
			name:     "list sets drops the trailing empty line",
			results:  []result{{out: "KUBE-A\nKUBE-B\n"}},
			call:     func(r Interface) (any, error) { return r.ListSets() },
			wantArgv: []string{"ipset", "list", "-n"},
			want:     []string{"KUBE-A", "KUBE-B"},
		},
		{
			name:     "list entries",
			results:  []result{{out: listOutput}},
			call:     func(r Interface) (any, error) { return r.ListEntries("KUBE-CLUSTER-IP") },
			wantArgv: []string{"ipset", "list", "KUBE-CLUSTER-IP"},
			want:     []string{"198.18.10.1,tcp:80", "198.18.10.2,udp:53"},
		},
		{
			name:    "list all sets' entries",
			results: []result{{out: listOutput + "\nName: KUBE-EMPTY\nType: hash:ip\nMembers:\n\nName: KUBE-LAST\nType: hash:ip\nMembers:\n198.18.0.1\n"}},
			call: func(r Interface) (any, error) {
				all, err := r.(AllLister).ListAllEntries()
				var flat []string
				for _, name := range []string{"KUBE-CLUSTER-IP", "KUBE-EMPTY", "KUBE-LAST"} {
					m, ok := all[name]
					flat = append(flat, fmt.Sprintf("%s%v:%s", name, ok, strings.Join(m, " ")))
				}
				return append(flat, fmt.Sprint(len(all))), err
			},
			wantArgv: []string{"ipset", "list"},
			want:     []string{"KUBE-CLUSTER-IPtrue:198.18.10.1,tcp:80 198.18.10.2,udp:53", "KUBE-EMPTYtrue:", "KUBE-LASTtrue:198.18.0.1", "3"},
		},
		{
			name:    "list entries of empty name runs nothing",
			call:    func(r Interface) (any, error) { return r.ListEntries("") },
			wantErr: "empty set name",
		},
		{
			name:     "version",
			results:  []result{{out: "ipset v7.17, protocol version: 7\n"}},
			call:     func(r Interface) (any, error) { return r.GetVersion() },
			wantArgv: []string{"ipset", "--version"},
			want:     "v7.17",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fe, argvs, _ := scripted(t, tc.results...)
			got, err := tc.call(NewWithExec(fe))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if IsNotFoundError(err) != tc.notFound {
				t.Errorf("IsNotFoundError(%v) = %v, want %v", err, !tc.notFound, tc.notFound)
			}
			if tc.want != nil && !equalAny(got, tc.want) {
				t.Errorf("result = %#v, want %#v", got, tc.want)
			}
			if tc.wantArgv != nil {
				if len(*argvs) != 1 || strings.Join((*argvs)[0], " ") != strings.Join(tc.wantArgv, " ") {
					t.Errorf("ran %q, want %q", *argvs, tc.wantArgv)
				}
			}
		})
	}
}

func equalAny(a, b any) bool {
	as, aok := a.([]string)
	bs, bok := b.([]string)
	if aok && bok {
		return strings.Join(as, "\x00") == strings.Join(bs, "\x00") && len(as) == len(bs)
	}
	return a == b
}

func TestRestoreRunner(t *testing.T) {
	var b Batch
	b.Create(&IPSet{Name: "KUBE-TMP", SetType: HashIP})
	b.Add("KUBE-TMP", "198.18.0.1")
	b.Add("KUBE-TMP", "198.18.0.2")
	b.Swap("KUBE-TMP", "KUBE-LIVE")
	b.Destroy("KUBE-TMP")
	wantIn := "create KUBE-TMP hash:ip family inet hashsize 1024 maxelem 65536\n" +
		"add KUBE-TMP 198.18.0.1\nadd KUBE-TMP 198.18.0.2\nswap KUBE-TMP KUBE-LIVE\ndestroy KUBE-TMP\n"

	t.Run("success", func(t *testing.T) {
		fe, argvs, stdins := scripted(t, result{})
		if err := NewWithExec(fe).(Restorer).Restore(&b, true); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join((*argvs)[0], " "); got != "ipset restore -exist" {
			t.Errorf("argv = %q", got)
		}
		if (*stdins)[0] != wantIn {
			t.Errorf("stdin =\n%s\nwant\n%s", (*stdins)[0], wantIn)
		}
	})
	t.Run("failure names the operation", func(t *testing.T) {
		fe, argvs, _ := scripted(t, result{out: "ipset v7.17: Error in line 4: The set with the given name does not exist\n", exit: 1})
		err := NewWithExec(fe).(Restorer).Restore(&b, false)
		var re *RestoreError
		if !errors.As(err, &re) || re.Line != 4 || re.Op != "swap KUBE-TMP KUBE-LIVE" {
			t.Fatalf("error = %#v, want RestoreError at line 4 (swap)", err)
		}
		if !IsNotFoundError(err) {
			t.Errorf("IsNotFoundError(%v) = false", err)
		}
		if got := strings.Join((*argvs)[0], " "); got != "ipset restore" {
			t.Errorf("argv = %q", got)
		}
	})
	t.Run("failure without line", func(t *testing.T) {
		fe, _, _ := scripted(t, result{out: "ipset: command not found", exit: 127})
		err := NewWithExec(fe).(Restorer).Restore(&b, false)
		var re *RestoreError
		if !errors.As(err, &re) || re.Line != 0 {
			t.Fatalf("error = %#v, want RestoreError without line", err)
		}
	})
	t.Run("empty batch runs nothing", func(t *testing.T) {
		fe, _, _ := scripted(t)
		if err := NewWithExec(fe).(Restorer).Restore(&Batch{}, false); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("invalid batch runs nothing", func(t *testing.T) {
		fe, _, _ := scripted(t)
		var bad Batch
		bad.Add("S", "198.18.0.1\nflush OTHER")
		if err := NewWithExec(fe).(Restorer).Restore(&bad, false); err == nil {
			t.Fatal("Restore of a batch with an injected line succeeded")
		}
	})
}

func TestBatch(t *testing.T) {
	tests := []struct {
		name    string
		build   func(b *Batch)
		want    string
		wantErr string
	}{
		{
			name: "all operations",
			build: func(b *Batch) {
				b.Create(&IPSet{Name: "P", SetType: BitmapPort, PortRange: "1-10"})
				b.Add("P", "5")
				b.Del("P", "6")
				b.Flush("P")
				b.Swap("P", "Q")
				b.Destroy("P")
			},
			want: "create P bitmap:port range 1-10\nadd P 5\ndel P 6\nflush P\nswap P Q\ndestroy P\n",
		},
		{
			name: "create does not modify the caller's set",
			build: func(b *Batch) {
				s := &IPSet{Name: "S"}
				b.Create(s)
				if s.SetType != "" {
					panic("Create modified its argument")
				}
			},
			want: "create S hash:ip,port family inet hashsize 1024 maxelem 65536\n",
		},
		{
			name:    "invalid create stops the batch",
			build:   func(b *Batch) { b.Add("S", "1"); b.Create(&IPSet{Name: "S", SetType: "nope"}); b.Add("S", "2") },
			wantErr: "batch operation 2 (create)",
		},
		{
			name:    "empty entry",
			build:   func(b *Batch) { b.Del("S", "") },
			wantErr: `invalid entry ""`,
		},
		{
			name:    "entry with space",
			build:   func(b *Batch) { b.Add("S", "1.2.3.4 -exist") },
			wantErr: "invalid entry",
		},
		{
			name:    "bad swap target",
			build:   func(b *Batch) { b.Swap("S", "") },
			wantErr: "empty ipset name",
		},
		{
			name:    "bad set name",
			build:   func(b *Batch) { b.Flush("a b") },
			wantErr: "whitespace",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b Batch
			tc.build(&b)
			var sb strings.Builder
			_, err := b.WriteTo(&sb)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || b.Err() != err {
					t.Fatalf("WriteTo error = %v, Err() = %v; want %q", err, b.Err(), tc.wantErr)
				}
				return
			}
			if err != nil || sb.String() != tc.want {
				t.Fatalf("WriteTo = %q, %v; want %q", sb.String(), err, tc.want)
			}
			b.Reset()
			if b.Len() != 0 || b.Err() != nil {
				t.Errorf("Reset left %d ops, err %v", b.Len(), b.Err())
			}
		})
	}
}

// FuzzBatchLines checks that whatever a caller passes as names and entries, an accepted batch
// renders exactly one restore line per operation: nothing can inject extra commands.
func FuzzBatchLines(f *testing.F) {
	f.Add("S", "198.18.0.1,tcp:80")
	f.Add("S", "1.2.3.4\nflush X")
	f.Add("a b", "x")
	f.Fuzz(func(t *testing.T, set, entry string) {
		var b Batch
		b.Add(set, entry)
		b.Del(set, entry)
		b.Flush(set)
		var sb strings.Builder
		if _, err := b.WriteTo(&sb); err != nil {
			return
		}
		lines := strings.Split(strings.TrimSuffix(sb.String(), "\n"), "\n")
		if len(lines) != b.Len() || b.Len() != 3 {
			t.Fatalf("batch of %d ops rendered %d lines: %q", b.Len(), len(lines), sb.String())
		}
		for i, l := range lines {
			if len(strings.Fields(l)) != len(strings.Split(l, " ")) {
				t.Fatalf("line %d %q splits into different words under Fields", i, l)
			}
		}
	})
}
