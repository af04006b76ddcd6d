//go:build linux

package nftables

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

// Units are packed into transactions by their expanded size: an element
// batch counts one operation per element, and is never split.
func TestPlanChunking(t *testing.T) {
	build := func() *plan {
		p := &plan{}
		p.add(&knftables.Chain{Name: "a"})
		p.flush(&knftables.Chain{Name: "a"})
		p.endUnit()
		p.addSlots("endpoints-0-tcp-00", 16, []string{"10.0.0.1 . 80", "10.0.0.2 . 80", "10.0.0.3 . 80"}, 0, 3)
		p.endUnit()
		p.deleteSlots("endpoints-0-tcp-00", 16, 1, 2)
		p.addSlots("endpoints-0-tcp-00", 16, []string{"10.0.0.1 . 80", "10.0.0.9 . 80"}, 1, 2)
		p.endUnit()
		p.addSlots("endpoints-0-tcp-00", 0, nil, 0, 0) // empty: no op at all
		p.endUnit()
		return p
	}
	for _, tc := range []struct {
		maxOps int
		want   []string // one entry per transaction
	}{
		{0, []string{"add chain|flush chain|add element 16|add element 17|add element 18|delete element 17|add element 17"}},
		{4, []string{"add chain|flush chain", "add element 16|add element 17|add element 18", "delete element 17|add element 17"}},
		{5, []string{"add chain|flush chain|add element 16|add element 17|add element 18", "delete element 17|add element 17"}},
		{2, []string{"add chain|flush chain", "add element 16|add element 17|add element 18", "delete element 17|add element 17"}},
	} {
		p := build()
		if p.size != 7 {
			t.Fatalf("plan size %d, want 7 expanded operations", p.size)
		}
		fake := knftables.NewFake(knftables.IPv4Family, kubeProxyTable)
		var got []string
		err := p.each(fake, tc.maxOps, func(tx *knftables.Transaction) error {
			if text := tx.String(); strings.Contains(text, "delete element") && !strings.Contains(text, "{ 17 : 10.0.0.9 . 80 }") {
				t.Errorf("the replaced slot's new value is missing:\n%s", text)
			}
			var ops []string
			for _, line := range strings.Split(strings.TrimSpace(tx.String()), "\n") {
				f := strings.Fields(line)
				op := f[0] + " " + f[1]
				if f[1] == "element" {
					op += " " + f[6] // the slot
				}
				ops = append(ops, op)
			}
			got = append(got, strings.Join(ops, "|"))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("maxOps=%d: transactions\n%s\nwant\n%s", tc.maxOps, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

// moveUnitsLast keeps every unit whole and each kind in its order, and
// eachGroup then sees one run of each kind.
func TestMoveUnitsLast(t *testing.T) {
	isElement := func(ops []op, _ int) bool { return allElements(ops) }
	for _, tc := range []struct {
		name  string
		units [][]string // names of chains; a digit names a service-ips element
		want  []string   // groups: kind and object names
	}{{
		name:  "empty",
		units: nil,
		want:  nil,
	}, {
		name:  "alternating",
		units: [][]string{{"a", "b"}, {"1"}, {"c"}, {"2", "3"}, {"d"}},
		want:  []string{"nft a b c d", "elements 1 2 3"},
	}, {
		name:  "elements only",
		units: [][]string{{"1"}, {"2"}},
		want:  []string{"elements 1 2"},
	}, {
		name:  "already last",
		units: [][]string{{"a"}, {"1"}},
		want:  []string{"nft a", "elements 1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pl := &plan{}
			for _, u := range tc.units {
				for _, name := range u {
					if name[0] >= '0' && name[0] <= '9' {
						pl.addElement(cServiceIPs, name, "goto x", nil)
					} else {
						pl.add(&knftables.Chain{Name: name})
					}
				}
				pl.endUnit()
			}
			size := pl.size
			pl.moveUnitsLast(isElement)
			if pl.size != size || len(pl.unitEnds) != len(tc.units) {
				t.Fatalf("size %d with %d units, want %d with %d", pl.size, len(pl.unitEnds), size, len(tc.units))
			}
			var got []string
			err := pl.eachGroup(0, elementUnit, func(ops []op, elements bool) error {
				g := map[bool]string{true: "elements", false: "nft"}[elements]
				for _, o := range ops {
					switch obj := o.obj.(type) {
					case *knftables.Chain:
						g += " " + obj.Name
					case *elemOp:
						g += " " + obj.key
					}
				}
				got = append(got, g)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("groups %q, want %q", got, tc.want)
			}
		})
	}
}
