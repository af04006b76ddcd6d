//go:build linux

package nftables

import (
	"slices"
	"testing"

	"sigs.k8s.io/knftables"
)

// moveUnitsLast keeps every unit whole and each kind in its order, and
// eachGroup then sees one run of each kind.
func TestMoveUnitsLast(t *testing.T) {
	isElement := func(ops []op, _ int) bool { return allElements(ops) }
	chain := func(name string) *knftables.Chain { return &knftables.Chain{Name: name} }
	elem := func(key string) *knftables.Element {
		return &knftables.Element{Map: "service-ips", Key: []string{key}, Value: []string{"goto x"}}
	}
	for _, tc := range []struct {
		name  string
		units [][]knftables.Object
		want  []string // groups: kind and object names
	}{{
		name:  "empty",
		units: nil,
		want:  nil,
	}, {
		name:  "alternating",
		units: [][]knftables.Object{{chain("a"), chain("b")}, {elem("1")}, {chain("c")}, {elem("2"), elem("3")}, {chain("d")}},
		want:  []string{"nft a b c d", "elements 1 2 3"},
	}, {
		name:  "elements only",
		units: [][]knftables.Object{{elem("1")}, {elem("2")}},
		want:  []string{"elements 1 2"},
	}, {
		name:  "already last",
		units: [][]knftables.Object{{chain("a")}, {elem("1")}},
		want:  []string{"nft a", "elements 1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pl := &plan{}
			for _, u := range tc.units {
				for _, o := range u {
					pl.add(o)
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
					case *knftables.Element:
						g += " " + obj.Key[0]
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
