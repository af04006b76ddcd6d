//go:build linux

package iptables

import (
	utiliptables "k8s.io/net-utils/iptables"
)

// ruleBuf accumulates iptables-restore lines. It takes strings only, unlike
// proxyutil.LineBuffer's ...interface{}, so writing a rule neither boxes its
// words nor reflects on them; the byte slice is kept across syncs.
type ruleBuf struct {
	b     []byte
	lines int
}

func (w *ruleBuf) reset() { w.b, w.lines = w.b[:0], 0 }

// line writes words separated by single spaces as one line.
func (w *ruleBuf) line(words ...string) {
	w.start(words...)
	w.end()
}

// start begins a line with words; finish it with more words and end().
// It lets a rule be assembled from fixed parts and optional fragments
// without building an argument slice.
func (w *ruleBuf) start(words ...string) {
	for i, s := range words {
		if i > 0 {
			w.b = append(w.b, ' ')
		}
		w.b = append(w.b, s...)
	}
}

// more appends words to the current line, each preceded by a space.
func (w *ruleBuf) more(words ...string) {
	for _, s := range words {
		w.b = append(w.b, ' ')
		w.b = append(w.b, s...)
	}
}

func (w *ruleBuf) end() {
	w.b = append(w.b, '\n')
	w.lines++
}

// chainLine declares a chain; in a --noflush restore this creates it or
// flushes it.
func (w *ruleBuf) chainLine(c utiliptables.Chain) {
	w.b = append(w.b, ':')
	w.b = append(w.b, c...)
	w.b = append(w.b, " - [0:0]\n"...)
	w.lines++
}

func (w *ruleBuf) appendBuf(o *ruleBuf) {
	w.b = append(w.b, o.b...)
	w.lines += o.lines
}
