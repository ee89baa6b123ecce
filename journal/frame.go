package journal

import (
	"bytes"
)

// DefaultMaxLine is Reader.MaxLine's default.
const DefaultMaxLine = 1 << 20

// minMaxLine is the smallest MaxLine: the wrapper's own lines must fit.
const minMaxLine = 256

// diffLineMax bounds a diff line, which is held whole (not cut at MaxLine)
// up to this size: its base64 patch of at most MaxDiff bytes, plus the
// JSON around it.
const diffLineMax = 4*((MaxDiff+2)/3) + 256

var diffPrefix = []byte(`{"__diff":`)

type candKind int

const (
	candEnd candKind = iota + 1
	candDiff
	candExit
)

// candidate is a line carrying the nonce that may yet prove to be the
// wrapper's: it is held, never delivered as output.
type candidate struct {
	kind candKind
	end  int64 // the offset just past its newline
	code int   // candExit
	diff *Diff // candDiff
}

// framer cuts a journal's bytes into lines, in one pass: its buffer holds
// only the unfinished line (at most MaxLine bytes, or diffLineMax for a
// diff line) and the last chunk, so its cost is linear in the output and
// its memory bounded whatever the line length.
type framer struct {
	nonce   []byte
	maxLine int
	buf     []byte
	r       int   // buf[r:] is not delivered yet; buf[r] starts a line or a piece
	scan    int   // buf[r:scan] holds no newline
	base    int64 // the offset of buf[0]
	skip    bool  // buf[0] will be the byte before the read's first offset
	midLine bool  // buf[r] continues a line (a piece was delivered, or the read began inside a line)
	start   *StartRecord
	held    []candidate // the candidates since the last delivered line, oldest first (at most 3)
	empty   int64       // the end offset of an empty line held back (0: none), see line
	gotByte bool
	emit    func(Line) error
}

// newFramer frames a journal read from offset from. From an offset past 0
// the byte before it is read too: it tells whether from starts a line, so
// a read resumed at the end of a piece cuts the rest of the line where the
// first read did.
func newFramer(from int64, maxLine int, nonce string, emit func(Line) error) *framer {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	maxLine = max(maxLine, minMaxLine)
	f := &framer{nonce: []byte(nonce), maxLine: maxLine, base: from, emit: emit}
	if from > 0 {
		f.base, f.skip = from-1, true
	}
	return f
}

// next is the offset of the first byte the framer has not received.
func (f *framer) next() int64 { return f.base + int64(len(f.buf)) }

// feed frames b, which follows every byte fed before.
func (f *framer) feed(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	f.gotByte = true
	f.append(b)
	if f.skip {
		f.skip, f.midLine, f.r, f.scan = false, f.buf[0] != '\n', 1, 1
	}
	for {
		i := bytes.IndexByte(f.buf[f.scan:], '\n')
		if i < 0 {
			f.scan = len(f.buf)
			break
		}
		nl := f.scan + i
		if err := f.line(nl); err != nil {
			return err
		}
		f.r, f.scan, f.midLine = nl+1, nl+1, false
	}
	// An unfinished line longer than the limit goes out in pieces, each
	// only once a byte after it is known to belong to the same line.
	if len(f.buf)-f.r > f.limit() {
		for len(f.buf)-f.r > f.maxLine {
			if err := f.piece(f.r+f.maxLine, true); err != nil {
				return err
			}
			f.r += f.maxLine
			f.midLine = true
		}
	}
	return nil
}

// append adds b to the buffer, first sliding the undelivered bytes to the
// front when that makes room: each byte is slid at most a few times.
func (f *framer) append(b []byte) {
	if f.r > 0 && cap(f.buf)-len(f.buf) < len(b) && f.r >= len(f.buf)/2 {
		n := copy(f.buf, f.buf[f.r:])
		f.buf = f.buf[:n]
		f.base += int64(f.r)
		f.scan -= f.r
		f.r = 0
	}
	if f.r > 0 && cap(f.buf)-len(f.buf) < len(b) {
		// Not worth sliding: grow into a fresh buffer without the
		// delivered bytes.
		nb := make([]byte, len(f.buf)-f.r, 2*(len(f.buf)-f.r+len(b)))
		copy(nb, f.buf[f.r:])
		f.base += int64(f.r)
		f.scan -= f.r
		f.r = 0
		f.buf = nb
	}
	f.buf = append(f.buf, b...)
}

// limit is how long the unfinished line may grow before it is cut.
func (f *framer) limit() int {
	if !f.midLine && f.maxLine < diffLineMax && bytes.HasPrefix(f.buf[f.r:], diffPrefix) {
		return diffLineMax
	}
	return f.maxLine
}

// line handles the line buf[r:nl], terminated at nl.
func (f *framer) line(nl int) error {
	if !f.midLine && nl-f.r <= f.limit() {
		data := f.buf[f.r:nl]
		end := f.base + int64(nl) + 1
		if f.base+int64(f.r) == 0 {
			if st, ok := ParseStartLine(data); ok {
				f.start = &st
				return nil
			}
		}
		if len(f.nonce) > 0 && bytes.Contains(data, f.nonce) {
			if isEnd, nl := parseEnd(data, string(f.nonce)); f.empty > 0 && isEnd && nl {
				// The wrapper's newline before its end line (see
				// endLine): not the agent's. An end line of an older
				// wrapper (no "__nl") follows the agent's own newline.
				f.empty = 0
			}
			if err := f.flushEmpty(); err != nil {
				return err
			}
			f.candidate(data, end)
			return nil
		}
		if err := f.flushEmpty(); err != nil {
			return err
		}
		if len(data) == 0 && len(f.nonce) > 0 {
			// An empty line is held until the next line: right before the
			// end line it is the wrapper's, and is dropped.
			f.held = f.held[:0]
			f.empty = end
			return nil
		}
		if len(data) <= f.maxLine {
			f.held = f.held[:0]
			return f.emit(Line{Data: bytes.Clone(data), End: end})
		}
		// A long line that only looked like a diff line: in pieces, cut
		// where they would have been had it not been held.
	}
	for nl-f.r > f.maxLine {
		if err := f.piece(f.r+f.maxLine, true); err != nil {
			return err
		}
		f.r += f.maxLine
		f.midLine = true
	}
	return f.piece(nl, false)
}

// piece delivers buf[r:to], a piece of a long line (the last one when
// partial is false, then to is the newline's index).
func (f *framer) piece(to int, partial bool) error {
	if err := f.flushEmpty(); err != nil {
		return err
	}
	f.held = f.held[:0]
	end := f.base + int64(to)
	if !partial {
		end++
	}
	return f.emit(Line{Data: bytes.Clone(f.buf[f.r:to]), End: end, Partial: partial})
}

// flushEmpty delivers the empty line held back, if any: the line after it
// is not the end line.
func (f *framer) flushEmpty() error {
	if f.empty == 0 {
		return nil
	}
	end := f.empty
	f.empty = 0
	f.held = f.held[:0]
	return f.emit(Line{Data: []byte{}, End: end})
}

// candidate holds a line that carries the nonce.
func (f *framer) candidate(data []byte, end int64) {
	nonce := string(f.nonce)
	if code, ok := ParseSentinel(data, nonce); ok {
		f.held = append(f.held, candidate{kind: candExit, end: end, code: code})
	} else if patch, cut, ok := ParseDiff(data, nonce); ok {
		c := candidate{kind: candDiff, end: end, diff: &Diff{Patch: patch, Truncated: cut}}
		if n := len(f.held); n > 0 && f.held[n-1].kind == candEnd {
			f.held = append(f.held[:0], f.held[n-1], c)
		} else {
			f.held = append(f.held[:0], c)
		}
	} else if ParseEnd(data, nonce) {
		f.held = append(f.held[:0], candidate{kind: candEnd, end: end})
	} else {
		// The nonce in a line of no form of the wrapper's: forged.
		f.held = f.held[:0]
	}
	if n := len(f.held); n > 3 {
		f.held = append(f.held[:0], f.held[n-3:]...)
	}
}

// exitAtEnd reports whether the last bytes received are an exit sentinel:
// it is the exit if the wrapper is gone and nothing follows it.
func (f *framer) exitAtEnd() bool {
	n := len(f.held)
	return n > 0 && f.held[n-1].kind == candExit && f.held[n-1].end == f.next() && f.r == len(f.buf)
}

// decide returns the exit if the journal, as received, ends with one: the
// wrapper was found gone (gone) before the journal's size was read (size),
// every byte up to that size was received, and the last line is a
// sentinel. It first delivers the diff line that counts, if any. current
// says whether the journal has the current form (with end lines) when the
// framer did not read the start line itself.
func (f *framer) decide(gone bool, size int64, current bool) (*Exit, error) {
	if !gone || f.next() < size || !f.exitAtEnd() {
		return nil, nil
	}
	if f.start != nil {
		current = f.start.Current
	}
	n := len(f.held)
	x := f.held[n-1]
	if n >= 2 && f.held[n-2].kind == candDiff && (!current || n >= 3 && f.held[n-3].kind == candEnd) {
		d := f.held[n-2]
		if err := f.emit(Line{End: d.end, Diff: d.diff}); err != nil {
			return nil, err
		}
	}
	f.held = f.held[:0]
	return &Exit{Code: x.code, End: x.end}, nil
}
