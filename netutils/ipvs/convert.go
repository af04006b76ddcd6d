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

package ipvs

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// checkVirtualServer rejects virtual servers the kernel would refuse with an unhelpful errno.
func checkVirtualServer(vs *VirtualServer) error {
	if vs == nil {
		return errors.New("nil IPVS virtual server")
	}
	if len(vs.Address) != 4 && len(vs.Address) != 16 {
		return fmt.Errorf("IPVS virtual server %s: invalid address %q", vs, vs.Address)
	}
	if stringToProtocol(vs.Protocol) == 0 {
		return fmt.Errorf("IPVS virtual server %s: unsupported protocol %q (want TCP, UDP or SCTP)", vs, vs.Protocol)
	}
	return nil
}

// checkRealServer rejects real servers that cannot belong to vs.
func checkRealServer(vs *VirtualServer, rs *RealServer) error {
	if rs == nil {
		return fmt.Errorf("nil real server for IPVS virtual server %s", vs)
	}
	if len(rs.Address) != 4 && len(rs.Address) != 16 {
		return fmt.Errorf("real server %s of IPVS virtual server %s: invalid address %q", rs, vs, rs.Address)
	}
	if (rs.Address.To4() != nil) != (vs.Address.To4() != nil) {
		return fmt.Errorf("real server %s of IPVS virtual server %s: address family differs from the virtual server's", rs, vs)
	}
	if rs.Weight < 0 {
		return fmt.Errorf("real server %s of IPVS virtual server %s: negative weight %d", rs, vs, rs.Weight)
	}
	return nil
}

func checkTimeouts(timeouts ...time.Duration) error {
	for _, d := range timeouts {
		if d < 0 {
			return fmt.Errorf("negative IPVS timeout %s", d)
		}
	}
	return nil
}

// IP protocol numbers, spelt out so this file builds on every OS.
const (
	protoTCP  = 6
	protoUDP  = 17
	protoSCTP = 132
)

func stringToProtocol(protocol string) uint16 {
	switch strings.ToLower(protocol) {
	case "tcp":
		return protoTCP
	case "udp":
		return protoUDP
	case "sctp":
		return protoSCTP
	}
	return 0
}

func protocolToString(proto Protocol) string {
	switch proto {
	case protoTCP:
		return "TCP"
	case protoUDP:
		return "UDP"
	case protoSCTP:
		return "SCTP"
	}
	return ""
}
