package localnodev1

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestServiceCIDRRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   *networkingv1.ServiceCIDR
	}{
		{"dual-stack", &networkingv1.ServiceCIDR{
			ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", ResourceVersion: "7"},
			Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16", "fd00:96::/112"}},
		}},
		{"single", &networkingv1.ServiceCIDR{
			ObjectMeta: metav1.ObjectMeta{Name: "extra"},
			Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"198.19.0.0/16"}},
		}},
		{"no CIDRs", &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "empty"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Through the wire too, so a field the encoder forgets shows up here.
			b, err := proto.Marshal(ServiceCIDRFromAPI(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var wire ServiceCIDR
			if err := proto.Unmarshal(b, &wire); err != nil {
				t.Fatal(err)
			}
			got, err := ServiceCIDRToAPI(&wire)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, tc.in) {
				t.Errorf("(-want +got)\n%s", cmp.Diff(tc.in, got))
			}
		})
	}
}

func TestServiceCIDRToAPIErrors(t *testing.T) {
	tests := []struct {
		name string
		in   *ServiceCIDR
		want string
	}{
		{"nil", nil, "service cidr: missing"},
		{"no name", &ServiceCIDR{Cidrs: []string{"10.96.0.0/16"}}, "service cidr: name: missing"},
		{"address, not CIDR", &ServiceCIDR{Name: "kubernetes", Cidrs: []string{"10.96.0.0/16", "10.97.0.1"}}, `service cidr kubernetes: cidrs[1]: "10.97.0.1" is not a CIDR`},
		{"garbage", &ServiceCIDR{Name: "x", Cidrs: []string{"not-a-cidr"}}, `service cidr x: cidrs[0]: "not-a-cidr" is not a CIDR`},
		{"empty string", &ServiceCIDR{Name: "x", Cidrs: []string{""}}, `service cidr x: cidrs[0]: "" is not a CIDR`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ServiceCIDRToAPI(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
			if got != nil {
				t.Errorf("got %v with the error, want nil", got)
			}
		})
	}
}

// FuzzServiceCIDRDecoder: arbitrary bytes never panic the decoder, and what it accepts
// round-trips.
func FuzzServiceCIDRDecoder(f *testing.F) {
	b, _ := proto.Marshal(&ServiceCIDR{Name: "kubernetes", Cidrs: []string{"10.96.0.0/16", "fd00:96::/112"}})
	f.Add(b)
	f.Add([]byte{0x12, 0x03, 'x', '/', '1'})
	f.Fuzz(func(t *testing.T, data []byte) {
		var c ServiceCIDR
		if proto.Unmarshal(data, &c) != nil {
			return
		}
		got, err := ServiceCIDRToAPI(&c)
		if err != nil {
			return
		}
		again, err := ServiceCIDRToAPI(ServiceCIDRFromAPI(got))
		if err != nil || !equality.Semantic.DeepEqual(again, got) {
			t.Fatalf("accepted service cidr does not round-trip: %v", err)
		}
	})
}
