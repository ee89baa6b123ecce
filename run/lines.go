package run

import (
	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/journal"
)

// maxJoinedLine bounds the line the runner joins from its pieces
// (journal.Line.Partial) for a translator that takes whole lines only. A
// longer line is dropped and an output.truncated event (reason "line")
// says where it is in the journal.
const maxJoinedLine = 16 << 20

// lineFeed turns journal lines into translated events: it scrubs secrets
// from them, hands the pieces of a long line to a translator that takes
// pieces or joins them for one that does not, and translates. Its output
// depends only on the bytes of the journal, not on where the reader cut
// a line into pieces (with the one exception of a piece translator's own
// event boundaries, which the sink's content-level check allows).
type lineFeed struct {
	tr     harness.Translator
	pieces harness.PieceTranslator // nil when tr takes whole lines only
	scrub  *scrubber

	joined   []byte // the pieces so far (joining translators)
	dropping bool   // the line outgrew maxJoinedLine: its pieces are dropped
	inLine   bool   // pieces of the current line were seen
	bytes    int64  // bytes of the current line so far
	next     int64  // offset just past the last complete line; -1 before the first
	// start is the journal offset of the line being translated (or the
	// last one translated).
	start int64
}

func newLineFeed(tr harness.Translator, sc *scrubber) *lineFeed {
	f := &lineFeed{tr: tr, scrub: sc, next: -1}
	f.pieces, _ = tr.(harness.PieceTranslator)
	return f
}

// begin notes where line l starts.
func (f *lineFeed) begin(l journal.Line) {
	if f.inLine {
		return
	}
	switch {
	case f.next >= 0:
		f.start = f.next
	case l.Partial:
		f.start = l.End - int64(len(l.Data))
	default:
		f.start = l.End - int64(len(l.Data)) - 1
	}
}

// skip notes a line that is not translated (the wrapper's diff).
func (f *lineFeed) skip(l journal.Line) {
	f.begin(l)
	f.next = l.End
}

// feed translates one line or piece.
func (f *lineFeed) feed(l journal.Line) []event.Event {
	f.begin(l)
	f.bytes += int64(len(l.Data))
	if l.Partial {
		f.inLine = true
		if f.pieces != nil {
			b := f.scrub.piece(l.Data, false)
			if len(b) == 0 {
				return nil
			}
			return f.pieces.Piece(b)
		}
		if !f.dropping && len(f.joined)+len(l.Data) > maxJoinedLine {
			f.dropping, f.joined = true, nil
		}
		if !f.dropping {
			f.joined = append(f.joined, l.Data...)
		}
		return nil
	}
	pieced, total := f.inLine, f.bytes
	joined, dropping := f.joined, f.dropping
	f.inLine, f.bytes, f.joined, f.dropping, f.next = false, 0, nil, false, l.End
	switch {
	case f.pieces != nil && pieced:
		return f.tr.Line(f.scrub.piece(l.Data, true))
	case !pieced:
		return f.tr.Line(f.scrub.line(l.Data))
	case dropping || len(joined)+len(l.Data) > maxJoinedLine:
		return []event.Event{event.CustomEvent(event.OutputTruncated, event.Truncation{Reason: event.TruncatedLine, LineBytes: total, JournalOffset: f.start})}
	default:
		return f.tr.Line(f.scrub.line(append(joined, l.Data...)))
	}
}

// end finishes a line whose pieces the journal ended in (no last piece
// came): it is translated as a complete line, so that nothing the
// scrubber or the translator held back is lost.
func (f *lineFeed) end() []event.Event {
	if !f.inLine {
		return nil
	}
	return f.feed(journal.Line{End: f.start + f.bytes})
}
