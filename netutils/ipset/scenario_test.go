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

package ipset_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"k8s.io/net-utils/ipset"
	ipsettest "k8s.io/net-utils/ipset/testing"
)

// scenario drives an implementation through the life cycle the IPVS proxier uses, plus a
// batch, and returns the first divergence from the kernel's documented behaviour. It runs
// against the real binary in a private namespace and against the fake, so the two are held to
// the same behaviour.
func scenario(ips ipset.Interface) error {
	check := func(what string, ok bool) error {
		if !ok {
			return fmt.Errorf("%s: unexpected result", what)
		}
		return nil
	}
	v4 := &ipset.IPSet{Name: "KUBE-T-V4", SetType: ipset.HashIPPort, HashFamily: ipset.ProtocolFamilyIPV4}
	v6 := &ipset.IPSet{Name: "KUBE-T-V6", SetType: ipset.HashIP, HashFamily: ipset.ProtocolFamilyIPV6, HashSize: 64, MaxElem: 128}
	ports := &ipset.IPSet{Name: "KUBE-T-PORTS", SetType: ipset.BitmapPort, PortRange: "30000-32767"}
	for _, s := range []*ipset.IPSet{v4, v6, ports} {
		if err := ips.CreateSet(s, false); err != nil {
			return err
		}
	}
	if v4.HashSize != 1024 || v4.MaxElem != 65536 {
		return fmt.Errorf("CreateSet did not fill defaults: %+v", v4)
	}
	if err := ips.CreateSet(v4, false); err == nil {
		return errors.New("creating an existing set without ignoreExistErr succeeded")
	}
	if err := ips.CreateSet(v4, true); err != nil {
		return fmt.Errorf("creating an existing set with ignoreExistErr: %w", err)
	}

	e1 := (&ipset.Entry{IP: "198.18.10.1", Port: 80, Protocol: ipset.ProtocolTCP, SetType: ipset.HashIPPort}).String()
	e2 := (&ipset.Entry{IP: "198.18.10.2", Port: 53, Protocol: ipset.ProtocolUDP, SetType: ipset.HashIPPort}).String()
	for _, e := range []string{e1, e2} {
		if err := ips.AddEntry(e, v4, false); err != nil {
			return err
		}
	}
	if err := ips.AddEntry(e1, v4, false); err == nil {
		return errors.New("adding a duplicate without ignoreExistErr succeeded")
	}
	if err := ips.AddEntry(e1, v4, true); err != nil {
		return fmt.Errorf("adding a duplicate with ignoreExistErr: %w", err)
	}
	if err := ips.AddEntry("fd00:18::1", v6, false); err != nil {
		return err
	}
	if err := ips.AddEntry("30080", ports, false); err != nil {
		return err
	}
	if err := ips.AddEntry("1.2.3.4", &ipset.IPSet{Name: "KUBE-T-MISSING"}, false); !ipset.IsNotFoundError(err) {
		return fmt.Errorf("adding to a missing set: error %v is not a not-found error", err)
	}

	in, err := ips.TestEntry(e1, v4.Name)
	if err != nil {
		return err
	}
	if err := check("TestEntry(present)", in); err != nil {
		return err
	}
	in, err = ips.TestEntry("198.18.10.9,tcp:80", v4.Name)
	if err != nil {
		return fmt.Errorf("TestEntry(absent): %w", err)
	}
	if err := check("TestEntry(absent)", !in); err != nil {
		return err
	}
	if _, err := ips.TestEntry(e1, "KUBE-T-MISSING"); !ipset.IsNotFoundError(err) {
		return fmt.Errorf("TestEntry on a missing set: error %v is not a not-found error", err)
	}

	got, err := ips.ListEntries(v4.Name)
	if err != nil {
		return err
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{e1, e2}) {
		return fmt.Errorf("ListEntries = %q, want %q", got, []string{e1, e2})
	}
	if _, err := ips.ListEntries("KUBE-T-MISSING"); !ipset.IsNotFoundError(err) {
		return fmt.Errorf("ListEntries on a missing set: error %v is not a not-found error", err)
	}

	if err := ips.DelEntry(e2, v4.Name); err != nil {
		return err
	}
	if err := ips.DelEntry(e2, v4.Name); !ipset.IsNotFoundError(err) {
		return fmt.Errorf("deleting a missing entry: error %v is not a not-found error", err)
	}

	// Replace the v6 set's members in one restore: fill a temporary set, swap, destroy it.
	r, ok := ips.(ipset.Restorer)
	if !ok {
		return errors.New("implementation is not a Restorer")
	}
	var b ipset.Batch
	b.Create(&ipset.IPSet{Name: "KUBE-T-TMP", SetType: ipset.HashIP, HashFamily: ipset.ProtocolFamilyIPV6, HashSize: 64, MaxElem: 128})
	b.Add("KUBE-T-TMP", "fd00:18::2")
	b.Add("KUBE-T-TMP", "fd00:18::3")
	b.Swap("KUBE-T-TMP", v6.Name)
	b.Destroy("KUBE-T-TMP")
	b.Del(v4.Name, "198.18.99.99,tcp:1") // missing, ignored under ignoreExist
	if err := r.Restore(&b, true); err != nil {
		return fmt.Errorf("Restore: %w", err)
	}
	got, err = ips.ListEntries(v6.Name)
	if err != nil {
		return err
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"fd00:18::2", "fd00:18::3"}) {
		return fmt.Errorf("after swap ListEntries(%s) = %q", v6.Name, got)
	}

	// A failing restore reports the failing operation's line.
	b.Reset()
	b.Add(v4.Name, "198.18.10.7,tcp:7")
	b.Add("KUBE-T-MISSING", "198.18.10.8")
	b.Add(v4.Name, "198.18.10.9,tcp:9")
	err = r.Restore(&b, false)
	var re *ipset.RestoreError
	if !errors.As(err, &re) || re.Line != 2 || !ipset.IsNotFoundError(err) {
		return fmt.Errorf("failing Restore: error %#v, want a not-found RestoreError at line 2", err)
	}
	// Whether the operation before the failing line took effect depends on how ipset buffered
	// the batch (here it did not, on ipset 7.17); the line after it must never be applied.
	if in, err := ips.TestEntry("198.18.10.9,tcp:9", v4.Name); err != nil || in {
		return fmt.Errorf("operation after the failing line was applied (%v, %v)", in, err)
	}

	if err := ips.FlushSet(v4.Name); err != nil {
		return err
	}
	if got, err := ips.ListEntries(v4.Name); err != nil || len(got) != 0 {
		return fmt.Errorf("after flush ListEntries = %q, %v", got, err)
	}
	names, err := ips.ListSets()
	if err != nil {
		return err
	}
	slices.Sort(names)
	if want := []string{"KUBE-T-PORTS", "KUBE-T-V4", "KUBE-T-V6"}; !slices.Equal(names, want) {
		return fmt.Errorf("ListSets = %q, want %q", names, want)
	}
	// One listing of all sets says what listing each does.
	all, err := ips.(ipset.AllLister).ListAllEntries()
	if err != nil {
		return err
	}
	if len(all) != len(names) {
		return fmt.Errorf("ListAllEntries lists %d sets, want %d: %q", len(all), len(names), all)
	}
	for _, name := range names {
		one, err := ips.ListEntries(name)
		if err != nil {
			return err
		}
		got := slices.Clone(all[name])
		slices.Sort(got)
		slices.Sort(one)
		if !slices.Equal(got, one) {
			return fmt.Errorf("ListAllEntries()[%s] = %q, ListEntries = %q", name, all[name], one)
		}
	}
	if err := ips.DestroySet(ports.Name); err != nil {
		return err
	}
	if err := ips.DestroySet(ports.Name); !ipset.IsNotFoundError(err) {
		return fmt.Errorf("destroying a missing set: error %v is not a not-found error", err)
	}
	if err := ips.DestroyAllSets(); err != nil {
		return err
	}
	if names, err := ips.ListSets(); err != nil || len(names) != 0 {
		return fmt.Errorf("after DestroyAllSets ListSets = %q, %v", names, err)
	}
	return nil
}

func TestScenarioFake(t *testing.T) {
	if err := scenario(ipsettest.NewFake("v7.17")); err != nil {
		t.Fatal(err)
	}
}
