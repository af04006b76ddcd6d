package iptables

import (
	"bytes"

	"k8s.io/apimachinery/pkg/util/sets"
)

// MakeChainLine returns the iptables-restore line that declares chain, with no policy
// and zero counters.
func MakeChainLine(chain Chain) string {
	return ":" + string(chain) + " - [0:0]"
}

// GetChainsFromTable returns the chains declared (":CHAIN ..." lines) in save, which
// should hold one table's iptables-save output.
func GetChainsFromTable(save []byte) sets.Set[Chain] {
	chains := sets.New[Chain]()
	for len(save) > 0 {
		line := save
		if i := bytes.IndexByte(save, '\n'); i >= 0 {
			line, save = save[:i], save[i+1:]
		} else {
			save = nil
		}
		if len(line) < 2 || line[0] != ':' {
			continue
		}
		name := line[1:]
		if i := bytes.IndexAny(name, " \t\r"); i >= 0 {
			name = name[:i]
		}
		if len(name) > 0 {
			chains.Insert(Chain(name))
		}
	}
	return chains
}

// LineData is one numbered line of text.
type LineData struct {
	// Line is the line number; the first line is 1.
	Line int
	// Data is the line's text without its line ending.
	Data string
}

// ExtractLines returns line and up to count lines either side of it from lines (the
// first line is 1), for showing the context of a ParseError. It returns nil when line
// is below 1.
func ExtractLines(lines []byte, line, count int) []LineData {
	if line < 1 {
		return nil
	}
	first := max(line-count, 1)
	last := line + count
	out := make([]LineData, 0, max(last-first+1, 0))
	n := 0
	for len(lines) > 0 && n < last {
		n++
		text := lines
		if i := bytes.IndexByte(lines, '\n'); i >= 0 {
			text, lines = lines[:i], lines[i+1:]
		} else {
			lines = nil
		}
		if n >= first {
			out = append(out, LineData{Line: n, Data: string(bytes.TrimSuffix(text, []byte("\r")))})
		}
	}
	return out
}
