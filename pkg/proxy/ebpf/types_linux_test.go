//go:build linux

package ebpf

import (
	"reflect"
	"testing"
)

// TestLayoutMatchesBPF checks that the Go map types the backend writes have the layout
// of the C structs, as bpf2go read them from the object's BTF: a field added to the C
// side and not here would otherwise write garbage into the kernel's maps.
func TestLayoutMatchesBPF(t *testing.T) {
	for _, tc := range []struct{ ours, generated any }{
		{feKey{}, socketlbFeKey{}},
		{feVal{}, socketlbFeVal{}},
		{setVal{}, socketlbSetVal{}},
		{beKey{}, socketlbBeKey{}},
		{beVal{}, socketlbBeVal{}},
	} {
		o, g := reflect.TypeOf(tc.ours), reflect.TypeOf(tc.generated)
		if o.Size() != g.Size() {
			t.Errorf("%s is %d bytes, %s %d", o, o.Size(), g, g.Size())
		}
		var gf []reflect.StructField
		for i := 0; i < g.NumField(); i++ {
			if f := g.Field(i); f.Name != "_" {
				gf = append(gf, f)
			}
		}
		if o.NumField() != len(gf) {
			t.Errorf("%s has %d fields, %s %d", o, o.NumField(), g, len(gf))
			continue
		}
		for i, f := range gf {
			of := o.Field(i)
			if of.Name != f.Name && !(of.Name == "SetID" && f.Name == "SetId") {
				t.Errorf("%s field %d is %s, %s has %s", o, i, of.Name, g, f.Name)
			}
			if of.Offset != f.Offset || of.Type.Size() != f.Type.Size() {
				t.Errorf("%s.%s at %d (%d bytes), %s.%s at %d (%d bytes)", o, of.Name, of.Offset, of.Type.Size(), g, f.Name, f.Offset, f.Type.Size())
			}
		}
	}
}
