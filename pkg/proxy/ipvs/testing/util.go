package testing

import utilipset "k8s.io/net-utils/ipset"

// ExpectedVirtualServer describes a virtual server a test expects: VSNum is
// how many virtual servers there are in all.
type ExpectedVirtualServer struct {
	VSNum    int
	IP       string
	Port     uint16
	Protocol string
	RS       []ExpectedRealServer
}

// ExpectedRealServer is a real server a test expects.
type ExpectedRealServer struct {
	IP   string
	Port uint16
}

// ExpectedIptablesChain maps a chain to the jump rules expected in it.
type ExpectedIptablesChain map[string][]ExpectedIptablesRule

// ExpectedIptablesRule is a rule a test expects: its source, the chain it
// jumps to and the set it matches.
type ExpectedIptablesRule struct {
	SourceAddress string
	JumpChain     string
	MatchSet      string
}

// ExpectedIPSet maps a set name to the entries expected in it.
type ExpectedIPSet map[string][]*utilipset.Entry
