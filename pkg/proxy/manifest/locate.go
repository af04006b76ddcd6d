package manifest

import (
	"strconv"
	"strings"
)

// docText is the raw text of a document, kept to map a field path such as
// "spec.ports[1].nodePort" back to the line that holds it. The lookup is a heuristic
// over YAML indentation (and plain key search for JSON); when it cannot follow the
// path it returns the deepest line it found, so a reported line is never worse than
// the start of the object.
type docText struct {
	first int // file line number of lines[0]
	lines []string
}

// contentLine returns the file line of the first line that is neither blank nor a
// comment, or 0 if the document is empty.
func (d docText) contentLine() int {
	for i, l := range d.lines {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "#") {
			return d.first + i
		}
	}
	return 0
}

type pathSeg struct {
	key   string
	index int // -1 for a key
}

func parsePath(path string) []pathSeg {
	var segs []pathSeg
	for path != "" {
		switch {
		case path[0] == '.':
			path = path[1:]
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return segs
			}
			inner := path[1:end]
			if n, err := strconv.Atoi(inner); err == nil {
				segs = append(segs, pathSeg{index: n})
			} else {
				segs = append(segs, pathSeg{key: inner, index: -1})
			}
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			segs = append(segs, pathSeg{key: path[:end], index: -1})
			path = path[end:]
		}
	}
	return segs
}

// locate returns the file line of path, searching from file line start.
func (d docText) locate(start int, path string) int {
	pos := start - d.first
	if pos < 0 || pos >= len(d.lines) {
		return start
	}
	for _, seg := range parsePath(path) {
		var next int
		if seg.index < 0 {
			next = d.findKey(pos, seg.key)
		} else {
			next = d.findItem(pos, seg.index)
		}
		if next < 0 {
			break
		}
		pos = next
	}
	return d.first + pos
}

func indentOf(l string) int {
	return len(l) - len(strings.TrimLeft(l, " \t"))
}

func (d docText) findKey(from int, key string) int {
	quoted := strconv.Quote(key)
	for i := from; i < len(d.lines); i++ {
		t := strings.TrimSpace(d.lines[i])
		for strings.HasPrefix(t, "- ") {
			t = strings.TrimSpace(t[2:])
		}
		t = strings.TrimLeft(t, "{,")
		t = strings.TrimSpace(t)
		if strings.HasPrefix(t, key+":") || strings.HasPrefix(t, quoted+":") ||
			strings.HasPrefix(t, "'"+key+"':") || strings.Contains(t, quoted+":") {
			return i
		}
	}
	return -1
}

// findItem finds the index-th element of the YAML sequence that starts after line from.
func (d docText) findItem(from, index int) int {
	first := -1
	// The sequence's first item may sit on the key's own line ("- name: x" after a
	// nested key) or on a following line.
	for i := from + 1; i < len(d.lines); i++ {
		t := strings.TrimSpace(d.lines[i])
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if strings.HasPrefix(t, "-") {
			first = i
		}
		break
	}
	if first < 0 {
		return -1
	}
	indent := indentOf(d.lines[first])
	count := 0
	for i := first; i < len(d.lines); i++ {
		l := d.lines[i]
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		in := indentOf(l)
		if in < indent || (in == indent && !strings.HasPrefix(t, "-")) {
			return -1
		}
		if in == indent {
			if count == index {
				return i
			}
			count++
		}
	}
	return -1
}
