package util

import (
	"bytes"
	"fmt"
	"strings"
)

// LineBuffer accumulates newline-terminated lines (for example an
// iptables-restore input) and counts them.
type LineBuffer interface {
	// Write joins args with single spaces and terminates the line. A []string
	// argument contributes each of its elements as separate words.
	Write(args ...interface{})
	// WriteBytes appends bytes as one line.
	WriteBytes(bytes []byte)
	// Reset empties the buffer, keeping its allocation.
	Reset()
	Bytes() []byte
	String() string
	// Lines returns the number of lines written since the last Reset.
	Lines() int
}

type lineBuffer struct {
	buf   bytes.Buffer
	lines int
}

// NewLineBuffer returns a LineBuffer that keeps what is written.
func NewLineBuffer() LineBuffer {
	return &lineBuffer{}
}

func (lb *lineBuffer) word(first *bool) {
	if !*first {
		lb.buf.WriteByte(' ')
	}
	*first = false
}

func (lb *lineBuffer) Write(args ...interface{}) {
	first := true
	for _, arg := range args {
		switch v := arg.(type) {
		case string:
			lb.word(&first)
			lb.buf.WriteString(v)
		case []string:
			for _, s := range v {
				lb.word(&first)
				lb.buf.WriteString(s)
			}
		default:
			// Rule builders only pass strings; anything else is formatted
			// rather than crashing the sync loop.
			lb.word(&first)
			fmt.Fprint(&lb.buf, v)
		}
	}
	lb.buf.WriteByte('\n')
	lb.lines++
}

func (lb *lineBuffer) WriteBytes(b []byte) {
	lb.buf.Write(b)
	lb.buf.WriteByte('\n')
	lb.lines++
}

func (lb *lineBuffer) Reset() {
	lb.buf.Reset()
	lb.lines = 0
}

func (lb *lineBuffer) Bytes() []byte  { return lb.buf.Bytes() }
func (lb *lineBuffer) String() string { return lb.buf.String() }
func (lb *lineBuffer) Lines() int     { return lb.lines }

// MarshalLog makes structured logs show the buffer as a list of lines.
func (lb *lineBuffer) MarshalLog() any {
	return strings.Split(lb.buf.String(), "\n")
}

type discardLineBuffer struct {
	lines int
}

// NewDiscardLineBuffer returns a LineBuffer that only counts lines; proxiers
// use it to size work they do not need to emit.
func NewDiscardLineBuffer() LineBuffer {
	return &discardLineBuffer{}
}

func (d *discardLineBuffer) Write(args ...interface{}) { d.lines++ }
func (d *discardLineBuffer) WriteBytes(b []byte)       { d.lines++ }
func (d *discardLineBuffer) Reset()                    { d.lines = 0 }
func (d *discardLineBuffer) Bytes() []byte             { return []byte{} }
func (d *discardLineBuffer) String() string            { return "" }
func (d *discardLineBuffer) Lines() int                { return d.lines }
