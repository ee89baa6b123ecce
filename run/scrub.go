package run

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/d10ffeed/corral/sandbox"
)

// Secret scrubbing: every journal line is scrubbed of the run's resolved
// secret values before the translator sees it, so no event — stored or
// streamed — carries one. A value is replaced with "[secret:NAME]" (as
// sandbox.Secrets.Redact does) in these forms:
//
//   - as it is;
//   - hex, lower and upper case;
//   - base64, standard and URL alphabets, padded and unpadded, on its own
//     and embedded in a longer base64 text at each of the three byte
//     alignments (the characters that depend on the neighbouring bytes are
//     left alone; only the value's own characters are matched);
//   - URL-escaped (query and path escaping) and percent-encoded byte by
//     byte (upper and lower case hex);
//   - JSON-escaped (with and without HTML escaping, with non-ASCII as
//     \uXXXX, with "/" as "\/"), once and twice (JSON inside a JSON
//     string), so a value inside a JSON line is caught before the line is
//     parsed.
//
// A replacement inside a JSON string keeps the string valid: a match
// that begins right after an escaping backslash, or ends with one, gets a
// backslash added so that the escape stays well-formed.
//
// Not covered: values shorter than minScrubLen bytes (they would mangle
// ordinary output and protect nothing a guess could not find); the
// mid-text base64 forms of values shorter than minAlignedLen bytes (their
// few characters occur by chance); a value split across two journal lines;
// any other transformation (compression, encryption, other encodings,
// reversed or interleaved text). A value split across the pieces of one
// long line (journal.Line.Partial) is caught: the scrubber keeps the tail
// of each piece until the next one.
//
// Scrubbing is a pure function of the line's bytes and the secret values,
// and gives the same output whether a line comes whole or in pieces, so a
// replay yields the same events. A takeover must therefore see the values
// the log was written with: a secret changed in between makes the replay
// diverge where the value was printed, and the run ends failed
// ("replay-diverged").
const (
	minScrubLen   = 4
	minAlignedLen = 8
)

// scrubPattern is one form of one secret.
type scrubPattern struct {
	text []byte
	repl string // "[secret:NAME]"
}

// scrubber removes secret values from lines; it carries the tail of the
// pieces of one long line. A nil scrubber scrubs nothing.
type scrubber struct {
	pats   []scrubPattern
	maxLen int
	carry  []byte // unscrubbed tail of the current line's pieces
	bs     int    // backslashes ending the original bytes consumed before carry
	next   []int  // per pattern: the next match at or after the cursor (scratch)
}

// newScrubber returns a scrubber for the secrets' values, or nil when no
// value is long enough to scrub.
func newScrubber(secrets sandbox.Secrets) *scrubber {
	seen := map[string]bool{}
	var pats []scrubPattern
	for _, name := range secrets.Names() {
		v, _ := secrets.Value(name)
		if len(v) < minScrubLen {
			continue
		}
		repl := "[secret:" + name + "]"
		for _, f := range secretForms(v) {
			if len(f) >= minScrubLen && !seen[f] {
				seen[f] = true
				pats = append(pats, scrubPattern{text: []byte(f), repl: repl})
			}
		}
	}
	if len(pats) == 0 {
		return nil
	}
	// Longest first: at one position the longest form wins.
	sort.SliceStable(pats, func(i, j int) bool { return len(pats[i].text) > len(pats[j].text) })
	s := &scrubber{pats: pats, next: make([]int, len(pats))}
	for _, p := range pats {
		s.maxLen = max(s.maxLen, len(p.text))
	}
	return s
}

// secretForms lists the forms of v that are scrubbed.
func secretForms(v string) []string {
	b := []byte(v)
	forms := []string{v, hex.EncodeToString(b), strings.ToUpper(hex.EncodeToString(b))}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		forms = append(forms, enc.EncodeToString(b), enc.WithPadding(base64.NoPadding).EncodeToString(b))
		if len(b) < minAlignedLen {
			continue
		}
		// Embedded in longer base64 text, v starts at one of three byte
		// alignments; keep the characters made of v's bits only.
		for k := 0; k < 3; k++ {
			s := enc.WithPadding(base64.NoPadding).EncodeToString(append(make([]byte, k), b...))
			drop := [3]int{0, 2, 3}[k]
			end := len(s)
			if (k+len(b))%3 != 0 {
				end-- // the last character holds bits of the next byte
			}
			if end > drop {
				forms = append(forms, s[drop:end])
			}
		}
	}
	var pct, pctLower strings.Builder
	for _, c := range b {
		fmt.Fprintf(&pct, "%%%02X", c)
		fmt.Fprintf(&pctLower, "%%%02x", c)
	}
	forms = append(forms, url.QueryEscape(v), url.PathEscape(v), pct.String(), pctLower.String())
	// JSON, once and twice.
	base := append([]string(nil), forms...)
	for _, f := range base {
		for _, j := range jsonForms(f) {
			forms = append(forms, j)
			forms = append(forms, jsonForms(j)...)
		}
	}
	return forms
}

// jsonForms lists the ways JSON encoders escape s inside a string (without
// the quotes).
func jsonForms(s string) []string {
	var out []string
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, html := range []bool{true, false} {
		b.Reset()
		enc.SetEscapeHTML(html)
		_ = enc.Encode(s)
		q := strings.TrimSuffix(b.String(), "\n")
		out = append(out, q[1:len(q)-1])
	}
	var ascii strings.Builder
	for _, r := range out[0] {
		switch {
		case r < utf8.RuneSelf:
			ascii.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&ascii, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&ascii, `\u%04x`, r)
		}
	}
	out = append(out, ascii.String())
	for _, f := range out[:3] {
		if strings.Contains(f, "/") {
			out = append(out, strings.ReplaceAll(f, "/", `\/`))
		}
	}
	return out
}

// line scrubs a whole text (a line, a patch, an error tail) on its own:
// the tail kept from the pieces of an unfinished line is left alone.
func (s *scrubber) line(b []byte) []byte {
	if s == nil {
		return b
	}
	carry, bs := s.carry, s.bs
	s.carry, s.bs = nil, 0
	out := s.piece(b, true)
	s.carry, s.bs = carry, bs
	return out
}

// piece scrubs the next piece of a line and returns the scrubbed bytes
// that can be released; the tail that a secret could still straddle is
// kept for the next piece. The last piece (final) releases everything and
// resets the scrubber for the next line.
func (s *scrubber) piece(b []byte, final bool) []byte {
	if s == nil {
		return b
	}
	buf := b
	if len(s.carry) > 0 {
		buf = append(s.carry, b...)
	}
	cut := len(buf) // matches starting before cut are replaced now
	if !final {
		cut = max(0, len(buf)-s.maxLen)
	}
	var out []byte
	pos := 0
	for i := range s.next {
		s.next[i] = -2 // not searched yet
	}
	for {
		at, pi := -1, -1
		for i, p := range s.pats {
			if s.next[i] == -1 {
				continue
			}
			if s.next[i] < pos {
				j := bytes.Index(buf[pos:], p.text)
				if j < 0 {
					s.next[i] = -1
					continue
				}
				s.next[i] = pos + j
			}
			if at < 0 || s.next[i] < at { // ties: the longer (earlier) pattern
				at, pi = s.next[i], i
			}
		}
		if at < 0 || at >= cut {
			break
		}
		p := s.pats[pi]
		end := at + len(p.text)
		if out == nil {
			out = make([]byte, 0, len(buf))
		}
		out = append(out, buf[pos:at]...)
		if s.backslashesBefore(buf, at)%2 == 1 {
			out = append(out, '\\') // the match began inside an escape
		}
		out = append(out, p.repl...)
		if s.backslashesBefore(buf, end)%2 == 1 {
			out = append(out, '\\') // the match ended inside an escape
		}
		pos = end
	}
	done := max(pos, cut)
	if out == nil && len(s.carry) == 0 && final {
		return b // nothing found: no copy
	}
	if out == nil {
		out = make([]byte, 0, done-pos)
	}
	out = append(out, buf[pos:done]...)
	if final {
		s.carry, s.bs = nil, 0
		return out
	}
	run := trailingBackslashes(buf[:done])
	if run == done {
		run += s.bs
	}
	s.bs = run
	s.carry = append(s.carry[:0:0], buf[done:]...)
	return out
}

// backslashesBefore counts the backslashes that end buf[:i], through the
// bytes consumed before buf.
func (s *scrubber) backslashesBefore(buf []byte, i int) int {
	n := trailingBackslashes(buf[:i])
	if n == i {
		n += s.bs
	}
	return n
}

func trailingBackslashes(b []byte) int {
	n := 0
	for n < len(b) && b[len(b)-1-n] == '\\' {
		n++
	}
	return n
}
