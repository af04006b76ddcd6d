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
	"net"
	"strconv"
	"strings"
	"unicode"

	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"
)

// errInvalidEntry is wrapped by every entry validation error.
var errInvalidEntry = errors.New("invalid ipset entry")

// IPSet describes a set to create.
type IPSet struct {
	// Name is the set's name, at most MaxNameLength bytes.
	Name string
	// SetType is the set's type.
	SetType Type
	// HashFamily is ProtocolFamilyIPV4 or ProtocolFamilyIPV6, for hash types.
	HashFamily string
	// HashSize is the initial hash size, for hash types.
	HashSize int
	// MaxElem is the maximum number of entries, for hash types.
	MaxElem int
	// PortRange is "from-to", for bitmap:port.
	PortRange string
	// Comment documents the set's purpose for readers of this code; it is not sent to the
	// kernel.
	Comment string
}

// Validate checks the set's type, family, sizes and port range. It does not check the name;
// CreateSet and Batch.Create do.
func (set *IPSet) Validate() error {
	if set.SetType == HashIPPort || set.SetType == HashIPPortIP || set.SetType == HashIPPortNet {
		if err := validateHashFamily(set.HashFamily); err != nil {
			return fmt.Errorf("ipset %q: %w", set.Name, err)
		}
	}
	if err := validateIPSetType(set.SetType); err != nil {
		return fmt.Errorf("ipset %q: %w", set.Name, err)
	}
	if set.SetType == BitmapPort {
		if _, _, err := parsePortRange(set.PortRange); err != nil {
			return fmt.Errorf("ipset %q: invalid PortRange %q: %w", set.Name, set.PortRange, err)
		}
	}
	if set.HashSize <= 0 {
		return fmt.Errorf("ipset %q: invalid HashSize %d: must be positive", set.Name, set.HashSize)
	}
	if set.MaxElem <= 0 {
		return fmt.Errorf("ipset %q: invalid MaxElem %d: must be positive", set.Name, set.MaxElem)
	}
	return nil
}

// ValidateName checks that name is usable as a set name and as a token in restore input.
func ValidateName(name string) error {
	if name == "" {
		return errors.New("empty ipset name")
	}
	if len(name) > MaxNameLength {
		return fmt.Errorf("ipset name %q is %d bytes, longer than %d", name, len(name), MaxNameLength)
	}
	if strings.ContainsFunc(name, isSpaceOrControl) {
		return fmt.Errorf("ipset name %q contains whitespace or control characters", name)
	}
	return nil
}

func isSpaceOrControl(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r)
}

// setIPSetDefaults fills the fields ipset(8) would otherwise default differently.
func (set *IPSet) setIPSetDefaults() {
	if set.HashSize == 0 {
		set.HashSize = 1024
	}
	if set.MaxElem == 0 {
		set.MaxElem = 65536
	}
	if set.HashFamily == "" {
		set.HashFamily = ProtocolFamilyIPV4
	}
	if len(set.SetType) == 0 {
		set.SetType = HashIPPort
	}
	if len(set.PortRange) == 0 {
		set.PortRange = DefaultPortRange
	}
}

// createArgs returns the "create" command words for set, without the leading "create".
func (set *IPSet) createArgs() []string {
	args := []string{set.Name, string(set.SetType)}
	switch set.SetType {
	case HashIPPortIP, HashIPPort, HashIPPortNet, HashIP:
		args = append(args,
			"family", set.HashFamily,
			"hashsize", strconv.Itoa(set.HashSize),
			"maxelem", strconv.Itoa(set.MaxElem),
		)
	case BitmapPort:
		args = append(args, "range", set.PortRange)
	}
	return args
}

// Entry is one member of a set. Which fields matter depends on SetType.
type Entry struct {
	// IP is the member's address (all types but bitmap:port).
	IP string
	// Port is the member's port (all types but hash:ip).
	Port int
	// Protocol is ProtocolTCP, ProtocolUDP or ProtocolSCTP; empty means tcp.
	Protocol string
	// Net is the network of a hash:ip,port,net member, in CIDR form.
	Net string
	// IP2 is the second address of a hash:ip,port,ip member.
	IP2 string
	// SetType is the type of the set the entry belongs to.
	SetType Type
}

// Validate reports whether the entry is well formed for set, logging the reason when it is not.
// As upstream, an empty Protocol is set to tcp. set may be nil except for bitmap:port entries,
// whose port is checked against the set's range.
func (e *Entry) Validate(set *IPSet) bool {
	if err := e.Check(set); err != nil {
		setName := ""
		if set != nil {
			setName = set.Name
		}
		klog.Background().Error(err, "Invalid ipset entry", "entry", e.String(), "ipset", setName)
		return false
	}
	return true
}

// Check is Validate returning the reason instead of logging it.
func (e *Entry) Check(set *IPSet) error {
	if e.Port < 0 || e.Port > 65535 {
		return fmt.Errorf("%w: port %d out of range 0-65535", errInvalidEntry, e.Port)
	}
	switch e.SetType {
	case HashIP:
		return e.checkIP(set)
	case HashIPPort:
		return e.checkIPAndProtocol(set)
	case HashIPPortIP:
		if err := e.checkIPAndProtocol(set); err != nil {
			return err
		}
		ip2 := netutils.ParseIPSloppy(e.IP2)
		if ip2 == nil {
			return fmt.Errorf("%w: invalid second IP %q", errInvalidEntry, e.IP2)
		}
		return checkFamily(set, ip2, e.IP2)
	case HashIPPortNet:
		if err := e.checkIPAndProtocol(set); err != nil {
			return err
		}
		_, ipNet, err := netutils.ParseCIDRSloppy(e.Net)
		if err != nil || ipNet == nil {
			return fmt.Errorf("%w: invalid net %q", errInvalidEntry, e.Net)
		}
		return checkFamily(set, ipNet.IP, e.Net)
	case BitmapPort:
		if set == nil {
			return fmt.Errorf("%w: a bitmap:port entry needs its set to check the port range", errInvalidEntry)
		}
		begin, end, err := parsePortRange(set.PortRange)
		if err != nil {
			return fmt.Errorf("%w: set %q has invalid PortRange %q: %w", errInvalidEntry, set.Name, set.PortRange, err)
		}
		if e.Port < begin || e.Port > end {
			return fmt.Errorf("%w: port %d outside range %s of set %q", errInvalidEntry, e.Port, set.PortRange, set.Name)
		}
		return nil
	}
	return fmt.Errorf("%w: unsupported set type %q", errInvalidEntry, e.SetType)
}

// String renders the entry in ipset(8)'s syntax for its type, or "" for an unknown type.
func (e *Entry) String() string {
	switch e.SetType {
	case HashIP:
		return e.IP
	case HashIPPort:
		return e.IP + "," + e.Protocol + ":" + strconv.Itoa(e.Port)
	case HashIPPortIP:
		return e.IP + "," + e.Protocol + ":" + strconv.Itoa(e.Port) + "," + e.IP2
	case HashIPPortNet:
		return e.IP + "," + e.Protocol + ":" + strconv.Itoa(e.Port) + "," + e.Net
	case BitmapPort:
		return strconv.Itoa(e.Port)
	}
	return ""
}

func (e *Entry) checkIPAndProtocol(set *IPSet) error {
	switch e.Protocol {
	case "":
		e.Protocol = ProtocolTCP
	case ProtocolTCP, ProtocolUDP, ProtocolSCTP:
	default:
		return fmt.Errorf("%w: unsupported protocol %q (want %s, %s or %s)", errInvalidEntry, e.Protocol, ProtocolTCP, ProtocolUDP, ProtocolSCTP)
	}
	return e.checkIP(set)
}

func (e *Entry) checkIP(set *IPSet) error {
	ip := netutils.ParseIPSloppy(e.IP)
	if ip == nil {
		return fmt.Errorf("%w: invalid IP %q", errInvalidEntry, e.IP)
	}
	return checkFamily(set, ip, e.IP)
}

// checkFamily rejects an address of the other family than the set's, which the kernel would
// refuse with a far less helpful message.
func checkFamily(set *IPSet, ip net.IP, text string) error {
	if set == nil || set.HashFamily == "" {
		return nil
	}
	is4 := ip.To4() != nil
	if (set.HashFamily == ProtocolFamilyIPV4) != is4 {
		return fmt.Errorf("%w: address %q does not belong to family %s of set %q", errInvalidEntry, text, set.HashFamily, set.Name)
	}
	return nil
}

func validateIPSetType(set Type) error {
	for _, valid := range ValidIPSetTypes {
		if set == valid {
			return nil
		}
	}
	return fmt.Errorf("unsupported SetType %q", set)
}

func validateHashFamily(family string) error {
	if family == ProtocolFamilyIPV4 || family == ProtocolFamilyIPV6 {
		return nil
	}
	return fmt.Errorf("unsupported HashFamily %q", family)
}

// parsePortRange parses "a-b" (either order) into begin <= end. An empty range is the default.
func parsePortRange(portRange string) (begin, end int, err error) {
	if portRange == "" {
		portRange = DefaultPortRange
	}
	lo, hi, ok := strings.Cut(portRange, "-")
	if !ok {
		return -1, -1, errors.New("port range must have the form a-b")
	}
	a, err := parsePort(lo)
	if err != nil {
		return -1, -1, err
	}
	b, err := parsePort(hi)
	if err != nil {
		return -1, -1, err
	}
	if a > b {
		a, b = b, a
	}
	return a, b, nil
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1, fmt.Errorf("invalid port %q", s)
	}
	if n < 0 || n > 65535 {
		return -1, fmt.Errorf("port %d out of range 0-65535", n)
	}
	return n, nil
}

// IsNotFoundError reports whether err says that a set or an element does not exist.
func IsNotFoundError(err error) bool {
	if err == nil {
		return false
	}
	es := err.Error()
	return strings.Contains(es, "does not exist") ||
		strings.Contains(es, "element is missing") ||
		strings.Contains(es, "it's not added")
}
