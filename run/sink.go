package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/store"
)

// The event sink. Every event a driver produces goes through emit (events
// translated from the journal: while a takeover replays the journal they
// are checked against the stored log, and only the rest is new) or
// emitFinal (the events that end the run: always new, appended after
// whatever the log holds). New events are capped (Options.MaxEventBytes),
// coalesced and appended in batches by flush.
//
// Coalescing: a run's first coalesceAfter content deltas
// (TEXT_MESSAGE_CONTENT, REASONING_MESSAGE_CONTENT, TOOL_CALL_ARGS) are
// stored one event each, as translated, so ordinary runs stream every
// delta as it came. Past that (a flood of output), consecutive deltas of
// one message or tool call that are pending in one flush window merge
// into one event of at most maxDeltaEvent escaped bytes; a longer delta is
// always split. So 500 MB of short lines become thousands of events, not
// hundreds of millions.
//
// Verification therefore works at the level of content: where stored
// deltas begin and end depends on timing, and on how the reader cut long
// lines. A stored content event
// must therefore equal the concatenation of the next replayed deltas of
// the same message or tool call; a replayed delta may straddle the end of
// a stored one, and what is past the stored log is new. Every other event
// must match its stored event byte for byte.

const (
	// maxDeltaEvent bounds the JSON-escaped delta of one stored content
	// event: pending deltas merge up to it, and longer deltas are split.
	maxDeltaEvent = 64 << 10
	// coalesceAfter is how many content deltas a run stores one event
	// each before pending deltas merge.
	coalesceAfter = 4096
	// flushBytes: once this much is pending, the driver appends at once.
	flushBytes = 4 << 20
	// DefaultMaxEventBytes is the default of Options.MaxEventBytes.
	DefaultMaxEventBytes = 64 << 20
)

// sinkState is the driver's event sink.
type sinkState struct {
	stored     int64         // events in the log when the claim was made
	vseq       int64         // the next stored event the replay must match
	voff       int           // bytes of stored event vseq's delta already matched
	replayOver bool          // verification ended: new events go after the stored ones
	verify     []store.Event // a window of the stored log
	cur        event.Event   // stored event curSeq, decoded
	curSeq     int64

	pending      []pendingEvent
	pendingBytes int
	lastFlush    time.Time // when the last append was made (Options.Now)
	contentOut   bool      // an append has carried content (text, reasoning, tool arguments)

	deltas    int64 // content deltas translated so far (replayed ones included)
	limit     int64 // the cap; <= 0: none
	measure   int64 // what the log holds and will hold, counted deterministically
	capped    bool  // the cap was reached: content is dropped
	lineStart int64 // journal offset of the line being translated
}

// pendingEvent is an event waiting for the next append. Content events
// keep their delta in buf so that merging does not copy it again and again.
type pendingEvent struct {
	ev      event.Event // for content: without its delta
	content bool
	key     string // content: the event without its delta, encoded
	buf     []byte // content: the delta
	size    int    // content: jsonLen(buf)
	full    bool   // content: no room for the next character
	data    []byte // other events: the encoded event
}

func isContent(t event.Type) bool {
	return t == event.TextMessageContent || t == event.ReasoningContent || t == event.ToolCallArgs
}

// streamKey encodes e without its delta: two content events of one key
// belong to one message or tool call and may be merged.
func streamKey(e event.Event) string {
	e.Delta = ""
	return string(e.Marshal())
}

// replaying reports whether stored events remain to be matched.
func (d *driver) replaying() bool { return !d.replayOver && d.vseq <= d.stored }

// emit takes events translated from the journal: those the log already
// holds (a replay after a takeover) are checked against it and skipped; the
// rest are queued for the next append.
func (d *driver) emit(evs []event.Event) error {
	for _, e := range evs {
		if err := d.emitOne(e); err != nil {
			return err
		}
	}
	return nil
}

// emitFinal takes events that end the run (its closing events, a failure,
// a cancel). They are never compared: while a replay is still matching
// (a journal read failed, or the journal ended before the stored log), the
// remaining stored events stay as they are and these go after them.
func (d *driver) emitFinal(evs []event.Event) {
	d.replayOver = true
	for _, e := range evs {
		if e.Type == event.RunFinished {
			for _, c := range d.agui.closing() {
				_ = d.emitOne(c)
			}
			e = d.agui.finished(e)
		}
		_ = d.emitOne(e) // cannot fail once the replay is over
	}
}

func (d *driver) emitOne(e event.Event) error {
	d.agui.see(e)
	content := isContent(e.Type)
	if content {
		e.Delta = validUTF8(e.Delta)
		if e.Delta == "" {
			return nil
		}
		d.deltas++
	}
	for d.replaying() {
		if content && d.capped {
			return nil
		}
		s, err := d.storedEvent(d.vseq)
		if err != nil {
			return err
		}
		if isProgress(s) && !isProgress(e) {
			// Not from the journal: nothing replays it.
			d.measure += int64(len(d.verify[d.vseq-d.verify[0].Seq].Data))
			d.vseq++
			continue
		}
		if isCapTruncation(s) {
			// The cap was reached here when the log was written; adopt it,
			// whatever this process's cap is.
			d.capped = true
			d.vseq++
			continue
		}
		if !content {
			if d.voff != 0 {
				return d.diverged(s, e, "the stored delta is longer than the replayed one")
			}
			data := d.cappedForm(e).Marshal()
			if !bytes.Equal(d.verify[d.vseq-d.verify[0].Seq].Data, data) {
				return d.diverged(s, e, "")
			}
			d.measure += int64(len(data))
			d.vseq++
			return nil
		}
		if !isContent(s.Type) || streamKey(s) != streamKey(e) {
			return d.diverged(s, e, "")
		}
		rest := s.Delta[d.voff:]
		if len(e.Delta) < len(rest) {
			if !strings.HasPrefix(rest, e.Delta) {
				return d.diverged(s, e, "the text differs")
			}
			d.voff += len(e.Delta)
			d.measure += int64(jsonLen(e.Delta))
			return nil
		}
		if !strings.HasPrefix(e.Delta, rest) {
			return d.diverged(s, e, "the text differs")
		}
		d.measure += int64(jsonLen(rest))
		e.Delta = e.Delta[len(rest):]
		d.vseq++
		d.voff = 0
		if e.Delta == "" {
			return nil
		}
		// The remainder meets the next stored event, or is new.
	}
	d.queue(e)
	return nil
}

// diverged is the error for a replayed event that contradicts stored
// event d.vseq.
func (d *driver) diverged(stored, replayed event.Event, detail string) error {
	if detail != "" {
		detail = " (" + detail + ")"
	}
	return &divergence{seq: d.vseq, stored: stored.Type, replayed: replayed.Type, detail: detail}
}

// divergence is errDiverged with where and what.
type divergence struct {
	seq              int64
	stored, replayed event.Type
	detail           string
}

func (e *divergence) Error() string {
	return fmt.Sprintf("%v at event %d: stored %s, replayed %s%s", errDiverged, e.seq, e.stored, e.replayed, e.detail)
}

func (e *divergence) Unwrap() error { return errDiverged }

// isProgress reports an event that is not from the journal (a
// preparation step, an egress attempt): a replay skips it.
func isProgress(e event.Event) bool {
	return e.Type == event.Custom && (e.Name == event.SandboxProgress || e.Name == event.EgressAttempt)
}

func isCapTruncation(e event.Event) bool {
	if e.Type != event.Custom || e.Name != event.OutputTruncated {
		return false
	}
	var t event.Truncation
	return json.Unmarshal(e.Value, &t) == nil && t.Reason == event.TruncatedCap
}

// cappedForm is e as the log keeps it once the cap was reached: a tool
// result without its content.
func (d *driver) cappedForm(e event.Event) event.Event {
	if d.capped && e.Type == event.ToolCallResult {
		e.Content = ""
	}
	return e
}

// queue adds a new event to the pending batch: under the cap, content
// deltas merge with the pending delta of the same message or tool call.
// Reaching the cap cuts the delta that crosses it and records one
// output.truncated event.
func (d *driver) queue(e event.Event) {
	if !isContent(e.Type) {
		e = d.cappedForm(e)
		data := e.Marshal()
		d.measure += int64(len(data))
		d.pending = append(d.pending, pendingEvent{ev: e, data: data})
		d.pendingBytes += len(data)
		return
	}
	if d.capped {
		return
	}
	size := int64(jsonLen(e.Delta))
	if d.limit > 0 && d.measure+size > d.limit {
		head := cutJSON(e.Delta, d.limit-d.measure)
		if head != "" {
			d.measure += int64(jsonLen(head))
			d.pushContent(e, head)
		}
		d.capped = true
		tr := event.CustomEvent(event.OutputTruncated, event.Truncation{Reason: event.TruncatedCap, BytesKept: d.measure, Limit: d.limit, JournalOffset: d.lineStart})
		d.queue(tr)
		return
	}
	d.measure += size
	d.pushContent(e, e.Delta)
}

// pushContent appends delta to the pending content of e's message or tool
// call, in events of at most maxDeltaEvent escaped bytes; past the first
// coalesceAfter deltas it goes into the last pending event when that is of
// the same message or tool call and has room.
func (d *driver) pushContent(e event.Event, delta string) {
	key := streamKey(e)
	e.Delta = ""
	merge := d.deltas > coalesceAfter
	for first := true; delta != ""; first = false {
		n := len(d.pending)
		if n == 0 || (first && !merge) || !d.pending[n-1].content || d.pending[n-1].key != key || d.pending[n-1].full {
			d.pending = append(d.pending, pendingEvent{ev: e, content: true, key: key})
			n++
		}
		last := &d.pending[n-1]
		head := cutJSON(delta, int64(maxDeltaEvent-last.size))
		if head == "" {
			if last.size > 0 {
				last.full = true
				continue
			}
			_, w := utf8.DecodeRuneInString(delta) // one character over the bound
			head = delta[:w]
		}
		sz := jsonLen(head)
		last.buf = append(last.buf, head...)
		last.size += sz
		d.pendingBytes += sz
		delta = delta[len(head):]
		if delta != "" {
			last.full = true
		}
	}
}

// storedEvent returns stored event seq, decoded, reading the log in
// batches.
func (d *driver) storedEvent(seq int64) (event.Event, error) {
	if d.curSeq == seq {
		return d.cur, nil
	}
	if len(d.verify) == 0 || d.verify[0].Seq > seq || d.verify[len(d.verify)-1].Seq < seq {
		d.verify = nil
		evs, err := d.r.store.ReadEvents(d.ctx, d.run.ID, seq-1, 256)
		if err != nil {
			return event.Event{}, err
		}
		if len(evs) == 0 || evs[0].Seq != seq {
			return event.Event{}, fmt.Errorf("%w: stored event %d is missing", errDiverged, seq)
		}
		d.verify = evs
	}
	ev, err := event.Unmarshal(d.verify[seq-d.verify[0].Seq].Data)
	if err != nil {
		return event.Event{}, fmt.Errorf("%w: stored event %d: %v", errDiverged, seq, err)
	}
	d.cur, d.curSeq = ev, seq
	return ev, nil
}

// flush appends the pending events, fenced by the driver epoch and the
// expected next sequence number.
func (d *driver) flush(ctx context.Context) error {
	if len(d.pending) == 0 {
		return nil
	}
	// The time is stamped here, as the store would (the time of the
	// append, to the millisecond), so the tail holds what the store does.
	now := store.Millis(time.Now())
	batch := make([]store.NewEvent, len(d.pending))
	for i, p := range d.pending {
		if p.content {
			p.ev.Delta = string(p.buf)
			p.data = p.ev.Marshal()
		}
		batch[i] = store.NewEvent{Type: string(p.ev.Type), Data: p.data, Time: now}
	}
	d.mu.Lock()
	first := d.lastSeq + 1
	d.mu.Unlock()
	if err := d.r.store.AppendEvents(ctx, d.run.ID, d.run.DriverEpoch, first, batch); err != nil {
		return err
	}
	appended := make([]store.Event, len(batch))
	for i, e := range batch {
		appended[i] = store.Event{RunID: d.run.ID, Seq: first + int64(i), Type: e.Type, Time: now}
		if len(e.Data) > 0 {
			appended[i].Data = e.Data
		}
	}
	d.mu.Lock()
	d.lastSeq += int64(len(batch))
	d.addTail(appended)
	d.mu.Unlock()
	d.lastFlush = d.r.opts.Now()
	if !d.contentOut {
		for _, p := range d.pending {
			d.contentOut = d.contentOut || p.content
		}
	}
	clear(d.pending) // let the deltas go
	d.pending = d.pending[:0]
	d.pendingBytes = 0
	d.broadcast()
	return nil
}

// flushDue reports whether the pending batch should be appended now: it is
// full, or idle is true (no more lines are waiting) and no append was made
// for a flush interval, or idle is true and the batch holds the run's
// first content. The second is the leading edge of the interval: the
// first output of a quiet agent is appended at once instead of at the next
// tick, while a steady stream still makes at most one append per interval.
// The third puts the first text (a turn's first words, what a user waits
// for) in the log at once even when the agent's start-up lines were
// appended a moment before.
func (d *driver) flushDue(idle bool) bool {
	if len(d.pending) >= d.r.opts.BatchSize || d.pendingBytes >= flushBytes {
		return true
	}
	if !idle || len(d.pending) == 0 {
		return false
	}
	if d.r.opts.Now().Sub(d.lastFlush) >= d.r.opts.FlushInterval {
		return true
	}
	if !d.contentOut {
		for _, p := range d.pending {
			if p.content {
				return true
			}
		}
	}
	return false
}

func (d *driver) broadcast() {
	d.mu.Lock()
	close(d.notify)
	d.notify = make(chan struct{})
	d.mu.Unlock()
}

// validUTF8 returns s with each byte that is not part of valid UTF-8
// replaced by U+FFFD, as encoding/json does: the delta is then the same
// string before and after a round trip through the log.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	return b.String()
}

// jsonASCII is the JSON-escaped length of each ASCII byte inside a string.
var jsonASCII = func() (t [utf8.RuneSelf]uint8) {
	for c := range t {
		b, _ := json.Marshal(string(rune(c)))
		t[c] = uint8(len(b) - 2)
	}
	return t
}()

// jsonLen is the length of s once JSON-escaped inside a string, as
// encoding/json writes it (a NUL is 6 bytes).
func jsonLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			n += int(jsonASCII[c])
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		n += runeJSONLen(r, w)
		i += w
	}
	return n
}

func runeJSONLen(r rune, w int) int {
	if (r == utf8.RuneError && w == 1) || r == '\u2028' || r == '\u2029' {
		return 6
	}
	return w
}

// cutJSON returns the longest prefix of s, ending on a character boundary,
// whose escaped length is at most budget.
func cutJSON(s string, budget int64) string {
	if budget <= 0 {
		return ""
	}
	n := int64(0)
	for i := 0; i < len(s); {
		var l, w int
		if c := s[i]; c < utf8.RuneSelf {
			l, w = int(jsonASCII[c]), 1
		} else {
			var r rune
			r, w = utf8.DecodeRuneInString(s[i:])
			l = runeJSONLen(r, w)
		}
		if n+int64(l) > budget {
			return s[:i]
		}
		n += int64(l)
		i += w
	}
	return s
}
