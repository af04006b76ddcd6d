//go:build linux

package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"golang.org/x/sys/unix"
)

func TestParseVersionOutput(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want Features
		err  bool
	}{
		{out: "iptables v1.8.9 (nf_tables)\n", want: Features{Version: utilversion.MustParseGeneric("1.8.9"), Variant: VariantNFT, Wait: true, WaitSeconds: true, RestoreWait: true, RandomFully: true}},
		{out: "ip6tables v1.8.7 (legacy)", want: Features{Version: utilversion.MustParseGeneric("1.8.7"), Variant: VariantLegacy, Wait: true, WaitSeconds: true, RestoreWait: true, RandomFully: true}},
		{out: "iptables v1.6.1", want: Features{Version: utilversion.MustParseGeneric("1.6.1"), Wait: true, WaitSeconds: true}},
		{out: "iptables v1.4.21", want: Features{Version: utilversion.MustParseGeneric("1.4.21"), Wait: true}},
		{out: "iptables v1.4.19.1", want: Features{Version: utilversion.MustParseGeneric("1.4.19.1")}},
		{out: "command not found", err: true},
		{out: "", err: true},
	} {
		got, err := parseVersionOutput(tc.out)
		if (err != nil) != tc.err {
			t.Errorf("parseVersionOutput(%q) error = %v, want error %v", tc.out, err, tc.err)
			continue
		}
		if err != nil {
			continue
		}
		if got.Version.String() != tc.want.Version.String() {
			t.Errorf("parseVersionOutput(%q) version = %v, want %v", tc.out, got.Version, tc.want.Version)
		}
		got.Version, tc.want.Version = nil, nil
		if got != tc.want {
			t.Errorf("parseVersionOutput(%q) = %+v, want %+v", tc.out, got, tc.want)
		}
	}
}

// versionExec answers "--version" with version and every other command with success,
// recording the command lines.
func versionExec(version string) *scriptExec {
	return &scriptExec{handle: func(cmd string, args []string, _ []byte) result {
		if len(args) == 1 && args[0] == "--version" {
			if version == "" {
				return result{out: "not found", status: 127}
			}
			return result{out: cmd + " v" + version + " (legacy)\n"}
		}
		return result{}
	}}
}

func TestCommandLines(t *testing.T) {
	for _, tc := range []struct {
		name     string
		version  string // "" makes detection fail
		protocol Protocol
		do       func(r *runner) error
		want     []string // command lines, except version detection
	}{{
		name: "EnsureChain, modern", version: "1.8.9", protocol: ProtocolIPv4,
		do:   func(r *runner) error { _, err := r.EnsureChain(TableNAT, "KUBE-X"); return err },
		want: []string{"iptables -w 5 -N KUBE-X -t nat"},
	}, {
		name: "EnsureChain, ipv6", version: "1.8.9", protocol: ProtocolIPv6,
		do:   func(r *runner) error { _, err := r.EnsureChain(TableFilter, "KUBE-X"); return err },
		want: []string{"ip6tables -w 5 -N KUBE-X -t filter"},
	}, {
		name: "wait without seconds", version: "1.4.21", protocol: ProtocolIPv4,
		do:   func(r *runner) error { return r.FlushChain(TableNAT, "KUBE-X") },
		want: []string{"iptables -w -F KUBE-X -t nat"},
	}, {
		name: "no wait at all", version: "1.4.19", protocol: ProtocolIPv4,
		do:   func(r *runner) error { return r.DeleteChain(TableNAT, "KUBE-X") },
		want: []string{"iptables -X KUBE-X -t nat"},
	}, {
		name: "detection failure assumes modern", version: "", protocol: ProtocolIPv4,
		do:   func(r *runner) error { _, err := r.ChainExists(TableNAT, "KUBE-X"); return err },
		want: []string{"iptables -w 5 -S KUBE-X -t nat"},
	}, {
		name: "EnsureRule of an existing rule only checks", version: "1.8.9", protocol: ProtocolIPv4,
		do: func(r *runner) error {
			_, err := r.EnsureRule(Append, TableNAT, ChainPostrouting, "-m", "comment", "--comment", "a b", "-j", "KUBE-POSTROUTING")
			return err
		},
		want: []string{"iptables -w 5 -C POSTROUTING -t nat -m comment --comment a b -j KUBE-POSTROUTING"},
	}, {
		name: "Restore, modern", version: "1.8.9", protocol: ProtocolIPv4,
		do: func(r *runner) error {
			return r.Restore(TableNAT, []byte("*nat\nCOMMIT\n"), NoFlushTables, RestoreCounters)
		},
		want: []string{"iptables-restore -w 5 -T nat --noflush --counters"},
	}, {
		name: "RestoreAll, ipv6, flush", version: "1.8.9", protocol: ProtocolIPv6,
		do:   func(r *runner) error { return r.RestoreAll([]byte("*nat\nCOMMIT\n"), FlushTables, NoRestoreCounters) },
		want: []string{"ip6tables-restore -w 5"},
	}, {
		name: "Restore without restore wait", version: "1.6.1", protocol: ProtocolIPv4,
		do:   func(r *runner) error { return r.RestoreAll(nil, NoFlushTables, NoRestoreCounters) },
		want: []string{"iptables-restore --noflush"},
	}, {
		name: "SaveInto", version: "1.8.9", protocol: ProtocolIPv6,
		do:   func(r *runner) error { return r.SaveInto(TableMangle, &bytes.Buffer{}) },
		want: []string{"ip6tables-save -t mangle"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := versionExec(tc.version)
			r := newInternal(e, tc.protocol, withLockFile(filepath.Join(t.TempDir(), "xtables.lock")))
			if err := tc.do(r); err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			var calls []string
			for _, c := range e.Calls() {
				if !strings.HasSuffix(c, " --version") {
					calls = append(calls, c)
				}
			}
			if !reflect.DeepEqual(calls, tc.want) {
				t.Errorf("commands = %q, want %q", calls, tc.want)
			}
		})
	}
}

func TestFeaturesDetectedOnce(t *testing.T) {
	e := versionExec("1.8.9")
	r := newInternal(e, ProtocolIPv4)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _ = r.Present() })
	}
	wg.Wait()
	n := 0
	for _, c := range e.Calls() {
		if strings.HasSuffix(c, "--version") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("version detected %d times, want once", n)
	}
	if !HasRandomFully(r) || r.Features().Variant != VariantLegacy {
		t.Errorf("unexpected features %+v", r.Features())
	}
}

// exitExec answers each iptables operation ("-N", "-C", ...) with a fixed result.
func exitExec(results map[string]result) *scriptExec {
	return &scriptExec{handle: func(cmd string, args []string, _ []byte) result {
		for _, a := range args {
			if r, ok := results[a]; ok {
				return r
			}
		}
		return result{}
	}}
}

var modern = withFeatures(Features{Wait: true, WaitSeconds: true, RestoreWait: true, RandomFully: true})

func TestExitStatusHandling(t *testing.T) {
	for _, tc := range []struct {
		name    string
		results map[string]result
		do      func(r *runner) (bool, error)
		want    bool
		err     string
		ops     []string // the operations run, in order
	}{{
		name:    "EnsureChain: created",
		results: map[string]result{},
		do:      func(r *runner) (bool, error) { return r.EnsureChain(TableNAT, "X") },
		want:    false, ops: []string{"-N"},
	}, {
		name:    "EnsureChain: exists",
		results: map[string]result{"-N": {out: "iptables: Chain already exists.", status: 1}},
		do:      func(r *runner) (bool, error) { return r.EnsureChain(TableNAT, "X") },
		want:    true, ops: []string{"-N"},
	}, {
		name:    "EnsureChain: other failure",
		results: map[string]result{"-N": {out: "Another app is currently holding the xtables lock.", status: 4}},
		do:      func(r *runner) (bool, error) { return r.EnsureChain(TableNAT, "X") },
		err:     "holding the xtables lock", ops: []string{"-N"},
	}, {
		name:    "EnsureRule: absent, appended",
		results: map[string]result{"-C": {out: "iptables: Bad rule (does a matching rule exist in that chain?).", status: 1}},
		do:      func(r *runner) (bool, error) { return r.EnsureRule(Append, TableNAT, "X", "-j", "ACCEPT") },
		want:    false, ops: []string{"-C", "-A"},
	}, {
		name:    "EnsureRule: absent, prepended",
		results: map[string]result{"-C": {status: 1}},
		do:      func(r *runner) (bool, error) { return r.EnsureRule(Prepend, TableNAT, "X", "-j", "ACCEPT") },
		want:    false, ops: []string{"-C", "-I"},
	}, {
		name:    "EnsureRule: present",
		results: map[string]result{},
		do:      func(r *runner) (bool, error) { return r.EnsureRule(Append, TableNAT, "X", "-j", "ACCEPT") },
		want:    true, ops: []string{"-C"},
	}, {
		name:    "EnsureRule: check fails",
		results: map[string]result{"-C": {out: "iptables v1.8.9: unknown option", status: 2}},
		do:      func(r *runner) (bool, error) { return r.EnsureRule(Append, TableNAT, "X", "--bogus") },
		err:     "unknown option", ops: []string{"-C"},
	}, {
		name:    "EnsureRule: add fails",
		results: map[string]result{"-C": {status: 1}, "-A": {out: "iptables: No chain/target/match by that name.", status: 1}},
		do:      func(r *runner) (bool, error) { return r.EnsureRule(Append, TableNAT, "X", "-j", "ACCEPT") },
		err:     "No chain/target/match", ops: []string{"-C", "-A"},
	}, {
		name:    "DeleteRule: absent is fine",
		results: map[string]result{"-C": {status: 1}},
		do:      func(r *runner) (bool, error) { return false, r.DeleteRule(TableNAT, "X", "-j", "ACCEPT") },
		ops:     []string{"-C"},
	}, {
		name:    "DeleteRule: present",
		results: map[string]result{},
		do:      func(r *runner) (bool, error) { return false, r.DeleteRule(TableNAT, "X", "-j", "ACCEPT") },
		ops:     []string{"-C", "-D"},
	}, {
		name:    "ChainExists: missing",
		results: map[string]result{"-S": {out: "iptables: No chain/target/match by that name.", status: 1}},
		do:      func(r *runner) (bool, error) { return r.ChainExists(TableNAT, "X") },
		err:     "No chain/target/match", ops: []string{"-S"},
	}, {
		name:    "DeleteChain: missing",
		results: map[string]result{"-X": {out: "iptables: No chain/target/match by that name.", status: 1}},
		do:      func(r *runner) (bool, error) { return false, r.DeleteChain(TableNAT, "X") },
		err:     "deleting chain X in table nat", ops: []string{"-X"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := exitExec(tc.results)
			r := newInternal(e, ProtocolIPv4, modern)
			got, err := tc.do(r)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want error containing %q, got %v", tc.err, err)
				}
			} else if err != nil {
				t.Fatalf("unexpected error %v", err)
			} else if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			var ops []string
			for _, c := range e.Calls() {
				ops = append(ops, strings.Fields(c)[3])
			}
			if !reflect.DeepEqual(ops, tc.ops) {
				t.Errorf("ran %q, want %q", ops, tc.ops)
			}
		})
	}
}

func TestSaveInto(t *testing.T) {
	e := &scriptExec{handle: func(cmd string, args []string, _ []byte) result {
		if args[1] == "bad" {
			return result{out: "iptables-save: table bad does not exist", status: 1}
		}
		return result{out: "*nat\nCOMMIT\n"}
	}}
	r := newInternal(e, ProtocolIPv4, modern)
	var buf bytes.Buffer
	buf.WriteString("# before\n")
	if err := r.SaveInto(TableNAT, &buf); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "# before\n*nat\nCOMMIT\n" {
		t.Errorf("SaveInto did not append the output: %q", buf.String())
	}
	buf.Reset()
	err := r.SaveInto("bad", &buf)
	if err == nil || !strings.Contains(err.Error(), "table bad does not exist") {
		t.Errorf("want the stderr in the error, got %v", err)
	}
}

func TestRestoreErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		output string
		line   int // 0: not a ParseError
		msg    string
	}{{
		name:   "legacy line failed",
		output: "iptables-restore: line 4 failed\n",
		line:   4,
	}, {
		name:   "nft line failed with reason",
		output: "iptables-nft-restore: line 12 failed: No chain/target/match by that name.\n",
		line:   12, msg: "No chain/target/match by that name.",
	}, {
		name: "error occurred at line",
		output: "iptables-restore v1.8.9 (legacy): unknown option \"--bogus\"\n" +
			"Error occurred at line: 4\n" +
			"Try `iptables-restore -h' or 'iptables-restore --help' for more information.\n",
		line: 4, msg: `unknown option "--bogus"`,
	}, {
		name: "error occurred at line, nft, multi-line reason",
		output: "iptables-nft-restore v1.8.9 (nf_tables): Chain 'NOPE' does not exist\n" +
			"Error occurred at line: 8\n" +
			"Try `iptables-nft-restore -h' or 'iptables-nft-restore --help' for more information.\n",
		line: 8, msg: "Chain 'NOPE' does not exist",
	}, {
		name: "nft batch failure",
		output: "iptables-nft-restore v1.8.9 (nf_tables): \n" +
			"line 3: CHAIN_DEL failed (Device or resource busy): chain KUBE-SEP-UKSFD7AGPMPPLUHC\n",
		line: 3, msg: "CHAIN_DEL failed (Device or resource busy): chain KUBE-SEP-UKSFD7AGPMPPLUHC",
	}, {
		name:   "no line",
		output: "Another app is currently holding the xtables lock. Perhaps you want to use the -w option?\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var gotInput []byte
			e := &scriptExec{handle: func(cmd string, args []string, stdin []byte) result {
				gotInput = stdin
				return result{out: tc.output, status: 1}
			}}
			r := newInternal(e, ProtocolIPv4, modern)
			input := []byte("*nat\n:A - [0:0]\nCOMMIT\n")
			err := r.RestoreAll(input, NoFlushTables, NoRestoreCounters)
			if err == nil {
				t.Fatal("want an error")
			}
			if !bytes.Equal(gotInput, input) {
				t.Errorf("iptables-restore got stdin %q, want %q", gotInput, input)
			}
			pErr, ok := err.(ParseError)
			if tc.line == 0 {
				if ok {
					t.Fatalf("got a ParseError for output without a line: %v", err)
				}
				if !strings.Contains(err.Error(), "holding the xtables lock") {
					t.Errorf("error lost the output: %v", err)
				}
				return
			}
			if !ok {
				t.Fatalf("want a ParseError, got %T: %v", err, err)
			}
			if pErr.Line() != tc.line {
				t.Errorf("Line() = %d, want %d", pErr.Line(), tc.line)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("line %d", tc.line)) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Error() = %q, want the line and %q", err, tc.msg)
			}
			if exitStatus(err) != 1 {
				t.Errorf("the exit status is not reachable through the ParseError")
			}
		})
	}
}

func TestRestoreTakesLockWithoutRestoreWait(t *testing.T) {
	lockPath := filepath.Join(t.TempDir(), "xtables.lock")
	var heldDuringRestore atomic.Bool
	e := &scriptExec{handle: func(cmd string, args []string, _ []byte) result {
		f, err := os.Open(lockPath)
		if err != nil {
			return result{out: err.Error(), status: 2}
		}
		defer f.Close()
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
			heldDuringRestore.Store(true)
		}
		return result{}
	}}
	r := newInternal(e, ProtocolIPv4, withLockFile(lockPath), withFeatures(Features{Wait: true, WaitSeconds: true}))
	if err := r.RestoreAll([]byte("*nat\nCOMMIT\n"), NoFlushTables, NoRestoreCounters); err != nil {
		t.Fatal(err)
	}
	if !heldDuringRestore.Load() {
		t.Errorf("the xtables lock was not held while iptables-restore ran")
	}

	// While someone else holds the lock, Restore gives up after the timeout.
	f, err := os.Open(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	r.lockTimeout = 300 * time.Millisecond
	err = r.RestoreAll([]byte("*nat\nCOMMIT\n"), NoFlushTables, NoRestoreCounters)
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("want a lock timeout, got %v", err)
	}
	if n := len(e.Calls()); n != 1 {
		t.Errorf("iptables-restore ran %d times, want once (not while the lock was held)", n)
	}
}

func TestNewBestEffort(t *testing.T) {
	e := &scriptExec{handle: func(cmd string, args []string, _ []byte) result {
		if strings.HasPrefix(cmd, "ip6tables") {
			return result{out: "ip6tables: can't initialize ip6tables table `nat': Table does not exist", status: 3}
		}
		return result{}
	}}
	got := newBestEffort(e, modern)
	if len(got) != 1 || got[v1.IPv4Protocol] == nil || got[v1.IPv4Protocol].Protocol() != ProtocolIPv4 {
		t.Errorf("newBestEffort = %v, want only IPv4", got)
	}
}

func TestIsNotFoundError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("iptables: No chain/target/match by that name."), true},
		{errors.New("iptables v1.8.9 (legacy): Couldn't load target `NOPE':No such file or directory"), true},
		{errors.New("iptables: Bad rule (does a matching rule exist in that chain?)."), true},
		{errors.New("iptables v1.8.2 (nf_tables): Chain 'KUBE-X' does not exist"), true},
		{fmt.Errorf("wrapped: %w", errors.New("No chain/target/match by that name")), true},
		{errors.New("Another app is currently holding the xtables lock."), false},
	} {
		if got := IsNotFoundError(tc.err); got != tc.want {
			t.Errorf("IsNotFoundError(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestMakeChainLine(t *testing.T) {
	if got := MakeChainLine("KUBE-SERVICES"); got != ":KUBE-SERVICES - [0:0]" {
		t.Errorf("MakeChainLine = %q", got)
	}
}

func TestGetChainsFromTable(t *testing.T) {
	save := []byte(`:FIRST-LINE - [0:0]
# Generated by iptables-save v1.8.9 on Wed Nov 25 23:41:46 2026
*nat
:PREROUTING ACCEPT [12:720]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:NO-SPACE
-A KUBE-SERVICES -j KUBE-SVC-A
COMMIT
:CRLF - [0:0]` + "\r\n")
	got := GetChainsFromTable(save)
	want := []Chain{"FIRST-LINE", "PREROUTING", "KUBE-SERVICES", "KUBE-SVC-A", "NO-SPACE", "CRLF"}
	if got.Len() != len(want) || !got.HasAll(want...) {
		t.Errorf("GetChainsFromTable = %v, want %v", got.UnsortedList(), want)
	}
	if GetChainsFromTable(nil).Len() != 0 {
		t.Errorf("chains found in empty input")
	}
}

func TestExtractLines(t *testing.T) {
	data := []byte("one\ntwo\r\nthree\nfour\nfive")
	for _, tc := range []struct {
		line, count int
		want        []LineData
	}{
		{line: 0, count: 2, want: nil},
		{line: 1, count: 0, want: []LineData{{1, "one"}}},
		{line: 1, count: 1, want: []LineData{{1, "one"}, {2, "two"}}},
		{line: 3, count: 1, want: []LineData{{2, "two"}, {3, "three"}, {4, "four"}}},
		{line: 5, count: 2, want: []LineData{{3, "three"}, {4, "four"}, {5, "five"}}},
		{line: 9, count: 2, want: []LineData{}},
		{line: 2, count: 10, want: []LineData{{1, "one"}, {2, "two"}, {3, "three"}, {4, "four"}, {5, "five"}}},
	} {
		got := ExtractLines(data, tc.line, tc.count)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ExtractLines(line %d, count %d) = %+v, want %+v", tc.line, tc.count, got, tc.want)
		}
	}
}

func FuzzParseRestoreError(f *testing.F) {
	f.Add("iptables-restore: line 4 failed\n")
	f.Add("iptables-nft-restore: line 12 failed: No chain/target/match by that name.\n")
	f.Add("iptables-restore v1.8.9 (legacy): unknown option \"--bogus\"\nError occurred at line: 4\nTry `iptables-restore -h' for more information.\n")
	f.Add("line 99999999999999999999999 failed")
	f.Fuzz(func(t *testing.T, out string) {
		pErr, ok := parseRestoreError("iptables-restore", out, nil)
		if ok && (pErr.Line() < 1 || !strings.Contains(pErr.Error(), fmt.Sprint(pErr.Line()))) {
			t.Fatalf("bad ParseError %q (line %d) from %q", pErr.Error(), pErr.Line(), out)
		}
	})
}

func FuzzParseVersionOutput(f *testing.F) {
	f.Add("iptables v1.8.9 (nf_tables)")
	f.Add("iptables v1.4.21")
	f.Add("v99999999999999999999.1")
	f.Fuzz(func(t *testing.T, out string) {
		got, err := parseVersionOutput(out)
		if err == nil && got.Version == nil {
			t.Fatalf("no error and no version for %q", out)
		}
	})
}
