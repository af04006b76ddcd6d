package iptables

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// notFoundMessages are fragments of the messages iptables-legacy and iptables-nft
// (1.8.x) print when a chain, rule, target or match does not exist.
var notFoundMessages = []string{
	// legacy: -A/-I/-X/-F on a missing chain, -C/-D with no matching rule;
	// nft: -X on a missing chain.
	"No chain/target/match by that name",
	// legacy: -j to a missing chain; nft 1.8.0: -A on a missing chain. Also printed
	// for a missing match module.
	"No such file or directory",
	// legacy: -C/-D on a missing chain; nft: -C/-D with no matching rule.
	"does a matching rule exist",
	// nft 1.8.2+: -A/-C/-D/-I on a missing chain, -j to a missing chain.
	"does not exist",
}

// IsNotFoundError reports whether err looks like iptables saying that a chain, rule or
// target does not exist. It matches message text, which is imperfect: use it to decide
// whether to log or ignore an error, not for anything that must be exact.
func IsNotFoundError(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	for _, s := range notFoundMessages {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// ParseError is the error Restore and RestoreAll return when iptables-restore rejects
// a line of its input.
type ParseError interface {
	// Line is the 1-based number of the input line iptables-restore rejected.
	Line() int
	// Error describes the failure, including the line number.
	Error() string
}

type parseError struct {
	cmd  string
	line int
	msg  string
	err  error
}

func (e *parseError) Line() int { return e.line }

func (e *parseError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("%s: input error on line %d", e.cmd, e.line)
	}
	return fmt.Sprintf("%s: input error on line %d: %s", e.cmd, e.line, e.msg)
}

// Unwrap returns the process error, so the exit status stays reachable.
func (e *parseError) Unwrap() error { return e.err }

// iptables-restore reports a rejected line in one of two ways:
//
//	iptables-restore: line 4 failed
//	iptables-nft-restore: line 4 failed: No chain/target/match by that name.
//	iptables-restore v1.8.9 (legacy): unknown option "--bogus"\nError occurred at line: 4
//	iptables-nft-restore v1.8.9 (nf_tables): \nline 3: CHAIN_DEL failed (Device or resource busy): chain X
var (
	nftLineRE      = regexp.MustCompile(`(?m)^line ([1-9][0-9]*): (.*)$`)
	lineFailedRE   = regexp.MustCompile(`(?m)\bline ([1-9][0-9]*) failed(?::\s*(.*))?$`)
	errorAtLineRE  = regexp.MustCompile(`(?m)^Error occurred at line: ([1-9][0-9]*)\s*$`)
	restoreUsageRE = regexp.MustCompile(`(?m)^Try .*for more information\.?\s*$`)
)

// parseRestoreError extracts the rejected line number from iptables-restore's output.
func parseRestoreError(cmd, output string, err error) (ParseError, bool) {
	if m := lineFailedRE.FindStringSubmatch(output); m != nil {
		line, convErr := strconv.Atoi(m[1])
		if convErr != nil {
			return nil, false
		}
		return &parseError{cmd: cmd, line: line, msg: strings.TrimSpace(m[2]), err: err}, true
	}
	loc := errorAtLineRE.FindStringSubmatchIndex(output)
	if loc == nil {
		m := nftLineRE.FindStringSubmatch(output)
		if m == nil {
			return nil, false
		}
		line, convErr := strconv.Atoi(m[1])
		if convErr != nil {
			return nil, false
		}
		return &parseError{cmd: cmd, line: line, msg: strings.TrimSpace(m[2]), err: err}, true
	}
	line, convErr := strconv.Atoi(output[loc[2]:loc[3]])
	if convErr != nil {
		return nil, false
	}
	// The explanation is what was printed before the "Error occurred" line, minus
	// the "cmd vX.Y.Z (variant): " prefix.
	msg := strings.TrimSpace(output[:loc[0]])
	if i := strings.Index(msg, "): "); i >= 0 {
		msg = msg[i+3:]
	}
	msg = strings.Join(strings.Fields(restoreUsageRE.ReplaceAllString(msg, "")), " ")
	return &parseError{cmd: cmd, line: line, msg: msg, err: err}, true
}
