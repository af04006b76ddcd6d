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
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	utilexec "k8s.io/utils/exec"
)

// Interface manages IP sets. Set and entry arguments are names and entries in ipset(8)
// syntax (see Entry.String).
type Interface interface {
	// FlushSet deletes all entries of the set, keeping the set.
	FlushSet(set string) error
	// DestroySet deletes the set.
	DestroySet(set string) error
	// DestroyAllSets deletes every set of the network namespace, not only this program's.
	DestroyAllSets() error
	// CreateSet fills in defaults, validates and creates the set. With ignoreExistErr an
	// existing set of the same name and type is not an error.
	CreateSet(set *IPSet, ignoreExistErr bool) error
	// AddEntry adds entry to set. With ignoreExistErr an existing entry is not an error.
	AddEntry(entry string, set *IPSet, ignoreExistErr bool) error
	// DelEntry deletes entry from set.
	DelEntry(entry string, set string) error
	// TestEntry reports whether entry is in set.
	TestEntry(entry string, set string) (bool, error)
	// ListEntries returns the entries of set as ipset(8) prints them.
	ListEntries(set string) ([]string, error)
	// ListSets returns the names of all sets.
	ListSets() ([]string, error)
	// GetVersion returns the ipset version, e.g. "v7.17".
	GetVersion() (string, error)
}

// Restorer applies a Batch with one "ipset restore" run. Implementations of Interface in this
// module (the real one and the fake) implement it too.
type Restorer interface {
	// Restore applies b in order. With ignoreExist, creating an existing set, adding an
	// existing entry and deleting a missing entry are not errors. Restore stops at the first
	// failing operation and is not atomic: operations before it may or may not have been
	// applied (ipset buffers them), operations after it never are.
	Restore(b *Batch, ignoreExist bool) error
}

// AllLister lists the entries of every set with one "ipset list" run: a caller comparing all
// its sets with what it wrote then pays one process, not one per set. Implementations of
// Interface in this module (the real one and the fake) implement it too.
type AllLister interface {
	// ListAllEntries returns the entries of every set of the network namespace as ipset(8)
	// prints them, keyed by set name; a set without entries maps to an empty slice.
	ListAllEntries() (map[string][]string, error)
}

type runner struct {
	exec utilexec.Interface
}

var (
	_ Interface = &runner{}
	_ Restorer  = &runner{}
	_ AllLister = &runner{}
)

// New returns an Interface that runs the ipset binary.
func New() Interface {
	return NewWithExec(utilexec.New())
}

// NewWithExec returns an Interface that runs the ipset binary through exec, so tests can
// script its answers.
func NewWithExec(exec utilexec.Interface) Interface {
	return &runner{exec: exec}
}

// run executes ipset with args and returns its combined output. The error names the command
// and carries ipset's message, which IsNotFoundError inspects.
func (r *runner) run(args ...string) ([]byte, error) {
	out, err := r.exec.Command(IPSetCmd, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ipset %s: %w (%s)", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

func (r *runner) CreateSet(set *IPSet, ignoreExistErr bool) error {
	if set == nil {
		return errors.New("creating ipset: nil set")
	}
	if err := ValidateName(set.Name); err != nil {
		return err
	}
	set.setIPSetDefaults()
	if err := set.Validate(); err != nil {
		return err
	}
	args := append([]string{"create"}, set.createArgs()...)
	if ignoreExistErr {
		args = append(args, "-exist")
	}
	if _, err := r.run(args...); err != nil {
		return fmt.Errorf("creating ipset %q: %w", set.Name, err)
	}
	return nil
}

func (r *runner) AddEntry(entry string, set *IPSet, ignoreExistErr bool) error {
	if set == nil {
		return fmt.Errorf("adding entry %q: nil set", entry)
	}
	args := []string{"add", set.Name, entry}
	if ignoreExistErr {
		args = append(args, "-exist")
	}
	if _, err := r.run(args...); err != nil {
		return fmt.Errorf("adding entry %q to ipset %q: %w", entry, set.Name, err)
	}
	return nil
}

func (r *runner) DelEntry(entry string, set string) error {
	if _, err := r.run("del", set, entry); err != nil {
		return fmt.Errorf("deleting entry %q from ipset %q: %w", entry, set, err)
	}
	return nil
}

// TestEntry treats ipset's "is NOT in set" answer as false rather than an error: ipset 7
// signals it with exit status 1, older versions with status 0.
func (r *runner) TestEntry(entry string, set string) (bool, error) {
	out, err := r.exec.Command(IPSetCmd, "test", set, entry).CombinedOutput()
	if bytes.Contains(out, []byte("is NOT in set")) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("testing entry %q in ipset %q: %w (%s)", entry, set, err, strings.TrimSpace(string(out)))
	}
	return true, nil
}

func (r *runner) FlushSet(set string) error {
	if _, err := r.run("flush", set); err != nil {
		return fmt.Errorf("flushing ipset %q: %w", set, err)
	}
	return nil
}

func (r *runner) DestroySet(set string) error {
	if _, err := r.run("destroy", set); err != nil {
		return fmt.Errorf("destroying ipset %q: %w", set, err)
	}
	return nil
}

func (r *runner) DestroyAllSets() error {
	if _, err := r.run("destroy"); err != nil {
		return fmt.Errorf("destroying all ipsets: %w", err)
	}
	return nil
}

func (r *runner) ListSets() ([]string, error) {
	out, err := r.run("list", "-n")
	if err != nil {
		return nil, fmt.Errorf("listing ipsets: %w", err)
	}
	return nonEmptyLines(out), nil
}

func (r *runner) ListEntries(set string) ([]string, error) {
	if set == "" {
		return nil, errors.New("listing ipset entries: empty set name")
	}
	out, err := r.run("list", set)
	if err != nil {
		return nil, fmt.Errorf("listing ipset %q: %w", set, err)
	}
	return parseMembers(out), nil
}

func (r *runner) ListAllEntries() (map[string][]string, error) {
	out, err := r.run("list")
	if err != nil {
		return nil, fmt.Errorf("listing all ipsets: %w", err)
	}
	return parseAllMembers(out), nil
}

// parseAllMembers splits the output of a bare "ipset list" into each set's members: every set
// is a "Name:" header, more header lines, "Members:", then one member a line up to a blank
// line or the next set.
func parseAllMembers(out []byte) map[string][]string {
	all := map[string][]string{}
	name, members := "", false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "Name:"):
			name, members = strings.TrimSpace(strings.TrimPrefix(line, "Name:")), false
			all[name] = []string{}
		case line == "Members:":
			members = name != ""
		case line == "":
			members = false
		case members:
			all[name] = append(all[name], line)
		}
	}
	return all
}

// parseMembers returns the lines after the "Members:" header of "ipset list" output.
func parseMembers(out []byte) []string {
	_, members, found := bytes.Cut(out, []byte("Members:\n"))
	if !found {
		// A set with no members may print "Members:" as the last line without a newline.
		return []string{}
	}
	return nonEmptyLines(members)
}

func nonEmptyLines(out []byte) []string {
	lines := []string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

func (r *runner) GetVersion() (string, error) {
	cmd := r.exec.Command(IPSetCmd, "--version")
	cmd.SetStdin(bytes.NewReader(nil))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ipset --version: %w (%s)", err, strings.TrimSpace(string(out)))
	}
	return parseVersion(out)
}

func parseVersion(out []byte) (string, error) {
	re, err := regexp.Compile(VersionPattern)
	if err != nil {
		return "", fmt.Errorf("invalid VersionPattern %q: %w", VersionPattern, err)
	}
	match := re.Find(out)
	if match == nil {
		return "", fmt.Errorf("no ipset version found in %q", strings.TrimSpace(string(out)))
	}
	return string(match), nil
}

// restoreLineRE finds the failing line in ipset restore's error message.
var restoreLineRE = regexp.MustCompile(`Error in line (\d+):`)

func (r *runner) Restore(b *Batch, ignoreExist bool) error {
	if b == nil {
		return nil
	}
	if b.err != nil {
		return b.err
	}
	if b.Len() == 0 {
		return nil
	}
	args := []string{"restore"}
	if ignoreExist {
		args = append(args, "-exist")
	}
	var in bytes.Buffer
	if _, err := b.WriteTo(&in); err != nil {
		return err
	}
	cmd := r.exec.Command(IPSetCmd, args...)
	cmd.SetStdin(&in)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	re := &RestoreError{Output: strings.TrimSpace(string(out)), Err: err}
	if m := restoreLineRE.FindSubmatch(out); m != nil {
		_, _ = fmt.Sscan(string(m[1]), &re.Line)
		if re.Line >= 1 && re.Line <= len(b.ops) {
			re.Op = b.ops[re.Line-1].String()
		}
	}
	return re
}

// RestoreError reports a failed Restore and, when ipset named it, the failing operation.
type RestoreError struct {
	// Line is the 1-based index of the failing operation in the batch, or 0 if unknown.
	Line int
	// Op is the failing operation in restore syntax, when Line is known.
	Op string
	// Output is ipset's message.
	Output string
	// Err is the process error.
	Err error
}

func (e *RestoreError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("ipset restore failed at line %d (%s): %v (%s)", e.Line, e.Op, e.Err, e.Output)
	}
	return fmt.Sprintf("ipset restore failed: %v (%s)", e.Err, e.Output)
}

func (e *RestoreError) Unwrap() error { return e.Err }
