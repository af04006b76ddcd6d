//go:build linux

package ipvs

import (
	"fmt"
	"strings"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"
	utilipset "k8s.io/net-utils/ipset"
)

// MinIPSetCheckVersion is the oldest ipset(8) IPVS mode accepts.
const MinIPSetCheckVersion = "6.0"

// IPSetVersioner reports the ipset(8) version; utilipset.Interface is one.
type IPSetVersioner interface {
	// GetVersion returns the version string, e.g. "v7.17".
	GetVersion() (string, error)
}

// IPSet is one of the sets IPVS mode programs: the set's spec plus the
// handle it is programmed through.
type IPSet struct {
	utilipset.IPSet
	handle utilipset.Interface
}

// NewIPSet returns the set name of setType for one family. IPv6 sets are
// named KUBE-6-... (cut to the kernel's 31 characters), so both families'
// sets live side by side.
func NewIPSet(handle utilipset.Interface, name string, setType utilipset.Type, isIPv6 bool, comment string) *IPSet {
	family := utilipset.ProtocolFamilyIPV4
	if isIPv6 {
		family = utilipset.ProtocolFamilyIPV6
		name = ipv6SetName(name)
	}
	return &IPSet{
		IPSet: utilipset.IPSet{
			Name:       name,
			SetType:    setType,
			HashFamily: family,
			Comment:    comment,
		},
		handle: handle,
	}
}

func ipv6SetName(name string) string {
	if !strings.HasPrefix(name, "KUBE-") {
		return name
	}
	name = "KUBE-6-" + strings.TrimPrefix(name, "KUBE-")
	if len(name) > utilipset.MaxNameLength {
		klog.V(4).Info("Ipset name truncated", "ipSetName", name, "truncatedName", name[:utilipset.MaxNameLength])
		name = name[:utilipset.MaxNameLength]
	}
	return name
}

// comment is the set's comment quoted for an iptables rule.
func (set *IPSet) comment() string { return `"` + set.Comment + `"` }

// checkMinVersion reports whether an "ipset --version" string is at least
// MinIPSetCheckVersion.
func checkMinVersion(vstring string) bool {
	v, err := utilversion.ParseGeneric(vstring)
	if err != nil {
		klog.Background().Error(err, "Got invalid version string", "versionString", vstring)
		return false
	}
	return !v.LessThan(utilversion.MustParseGeneric(MinIPSetCheckVersion))
}

func ensureMinVersion(ipsetver IPSetVersioner) error {
	v, err := ipsetver.GetVersion()
	if err != nil {
		return fmt.Errorf("error getting ipset version: %w", err)
	}
	if !checkMinVersion(v) {
		return fmt.Errorf("ipset version %q is less than min required version %s", v, MinIPSetCheckVersion)
	}
	return nil
}
