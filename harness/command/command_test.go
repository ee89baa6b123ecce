package command

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
)

// perByte replaces each byte that is not valid UTF-8 with U+FFFD, as
// encoding/json does.
func perByte(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	return b.String()
}

func content(evs []event.Event) (text string, starts int) {
	var b strings.Builder
	for _, e := range evs {
		switch e.Type {
		case event.TextMessageContent:
			b.WriteString(e.Delta)
		case event.TextMessageStart:
			starts++
		}
	}
	return b.String(), starts
}

// TestPiecesAsLine cuts a line with multi-byte characters into pieces at
// every position and checks the pieces give the text of the whole line,
// one message, no newline between pieces, and every delta valid UTF-8.
func TestPiecesAsLine(t *testing.T) {
	line := []byte("añ€😀 z\xffend")
	whole, _ := content(Harness{}.Translator(harness.Run{RunID: "r"}).Line(line))
	for cut1 := 1; cut1 < len(line); cut1++ {
		for cut2 := cut1; cut2 < len(line); cut2++ {
			tr := Harness{}.Translator(harness.Run{RunID: "r"}).(harness.PieceTranslator)
			var evs []event.Event
			evs = append(evs, tr.Piece(line[:cut1])...)
			evs = append(evs, tr.Piece(line[cut1:cut2])...)
			evs = append(evs, tr.Line(line[cut2:])...)
			evs = append(evs, tr.End(0)...)
			got, starts := content(evs)
			if got != whole || starts != 1 {
				t.Fatalf("cut at %d,%d: %q (%d starts), want %q", cut1, cut2, got, starts, whole)
			}
			// Each delta encodes on its own (as the event log does) to
			// what the whole line encodes to: no character is cut.
			var each strings.Builder
			for _, e := range evs {
				if e.Type == event.TextMessageContent {
					each.WriteString(perByte(e.Delta))
				}
			}
			if each.String() != perByte(whole) {
				t.Fatalf("cut at %d,%d: a character was cut between deltas: %q", cut1, cut2, each.String())
			}
		}
	}
	// A journal that ends inside a line's pieces keeps the held bytes.
	tr := Harness{}.Translator(harness.Run{RunID: "r"}).(harness.PieceTranslator)
	evs := append(tr.Piece([]byte("ab\xe2\x82")), tr.End(0)...)
	if got, _ := content(evs); got != "ab\xe2\x82" {
		t.Errorf("end inside pieces: %q", got)
	}
}
