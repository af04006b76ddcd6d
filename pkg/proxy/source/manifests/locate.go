package manifests

import (
	"regexp"
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
	items := d.seqItems(from, index+1)
	if len(items) <= index {
		return -1
	}
	return items[index]
}

// itemLines returns the file lines of every element of the YAML sequence under the
// top-level key, in one pass (a list of thousands of items would make looking each
// up on its own quadratic), or nil when it cannot follow the text.
func (d docText) itemLines(start int, key string) []int {
	pos := start - d.first
	if pos < 0 || pos >= len(d.lines) {
		return nil
	}
	k := d.findKey(pos, key)
	if k < 0 {
		return nil
	}
	items := d.seqItems(k, -1)
	for i := range items {
		items[i] += d.first
	}
	return items
}

// seqItems returns the line indexes of up to limit (all when negative) elements of
// the YAML sequence that starts after line from.
func (d docText) seqItems(from, limit int) []int {
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
		return nil
	}
	indent := indentOf(d.lines[first])
	var items []int
	for i := first; i < len(d.lines) && len(items) != limit; i++ {
		l := d.lines[i]
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		in := indentOf(l)
		if in < indent || (in == indent && !strings.HasPrefix(t, "-")) {
			break
		}
		if in == indent {
			items = append(items, i)
		}
	}
	return items
}

// topLevel returns the value of a top-level "key: value" line, unquoted.
func topLevel(line, key string) (string, bool) {
	v, ok := strings.CutPrefix(line, key+":")
	if !ok {
		return "", false
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = v[:i]
	}
	return strings.Trim(strings.TrimSpace(v), `"'`), true
}

// isList reports whether the document's top-level kind is a List or typed list.
func (d docText) isList() bool {
	for _, l := range d.lines {
		if v, ok := topLevel(strings.TrimRight(l, "\r"), "kind"); ok {
			return strings.HasSuffix(v, "List")
		}
	}
	return false
}

var flowFieldRE = regexp.MustCompile(`(?:^|[{,])\s*(name|namespace)\s*:\s*["']?([^,}"'\s]+)`)

// describe names the object of a document that did not parse, from its text: a
// top-level kind, and name and namespace directly under metadata, in block or flow
// style. It gives what it finds, or "".
func (d docText) describe() string {
	var kind, name, namespace string
	inMeta, childIndent := false, -1
	for _, raw := range d.lines {
		l := strings.TrimRight(raw, "\r")
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if indentOf(l) == 0 {
			inMeta = false
			if v, ok := topLevel(l, "kind"); ok {
				kind = v
			}
			if v, ok := topLevel(l, "metadata"); ok {
				if strings.HasPrefix(v, "{") {
					for _, m := range flowFieldRE.FindAllStringSubmatch(v, -1) {
						if m[1] == "name" && name == "" {
							name = m[2]
						} else if m[1] == "namespace" && namespace == "" {
							namespace = m[2]
						}
					}
				} else {
					inMeta, childIndent = true, -1
				}
			}
			continue
		}
		if !inMeta {
			continue
		}
		if childIndent < 0 {
			childIndent = indentOf(l)
		}
		if indentOf(l) != childIndent {
			continue
		}
		if v, ok := topLevel(t, "name"); ok && name == "" {
			name = v
		} else if v, ok := topLevel(t, "namespace"); ok && namespace == "" {
			namespace = v
		}
	}
	if name == "" {
		return ""
	}
	return describeName(kind, namespace, name)
}
