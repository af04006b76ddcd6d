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

// Type is an ipset set type as named by ipset(8).
type Type string

const (
	// HashIPPort stores IP, protocol and port triples.
	HashIPPort Type = "hash:ip,port"
	// HashIPPortIP stores IP, protocol, port and a second IP.
	HashIPPortIP Type = "hash:ip,port,ip"
	// HashIPPortNet stores IP, protocol, port and a network.
	HashIPPortNet Type = "hash:ip,port,net"
	// BitmapPort stores ports from a fixed range.
	BitmapPort Type = "bitmap:port"
	// HashIP stores IP addresses.
	HashIP Type = "hash:ip"
)

// DefaultPortRange is the range of a bitmap:port set created without one.
const DefaultPortRange string = "0-65535"

// Hash families and entry protocols as spelt by ipset(8).
const (
	ProtocolFamilyIPV4 = "inet"
	ProtocolFamilyIPV6 = "inet6"
	ProtocolTCP        = "tcp"
	ProtocolUDP        = "udp"
	ProtocolSCTP       = "sctp"
)

// ValidIPSetTypes lists the set types this package can create.
var ValidIPSetTypes = []Type{
	HashIPPort,
	HashIPPortIP,
	BitmapPort,
	HashIPPortNet,
	HashIP,
}

// IPSetCmd is the binary this package runs.
const IPSetCmd = "ipset"

// EntryMemberPattern matches the header of "ipset list" output up to the member lines.
// Kept for API compatibility; ListEntries parses the output without it.
var EntryMemberPattern = "(?m)^(.*\n)*Members:\n"

// VersionPattern extracts the version from "ipset --version".
var VersionPattern = "v[0-9]+\\.[0-9]+"

// MaxNameLength is the longest set name the kernel accepts (IPSET_MAXNAMELEN - 1).
const MaxNameLength = 31
