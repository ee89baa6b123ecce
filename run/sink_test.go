package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// sinkRun is a run in a store whose log test drivers write.
type sinkRun struct {
	t     *testing.T
	st    store.Store
	id    string
	epoch int64
}

func newSinkRun(t *testing.T) *sinkRun {
	t.Helper()
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	if err := st.CreateRun(t.Context(), store.Run{ID: "run-s", ThreadID: "th"}); err != nil {
		t.Fatal(err)
	}
	return &sinkRun{t: t, st: st, id: "run-s"}
}

// driver claims the run (as a takeover does) and returns a driver whose
// sink is ready, with the given cap.
func (s *sinkRun) driver(limit int64) *driver {
	s.t.Helper()
	ctx := s.t.Context()
	rec, err := s.st.ClaimRun(ctx, s.id, s.epoch)
	if err != nil {
		s.t.Fatal(err)
	}
	s.epoch = rec.DriverEpoch
	last, err := s.st.LastSeq(ctx, s.id)
	if err != nil {
		s.t.Fatal(err)
	}
	r := &Runner{store: s.st, log: slog.New(slog.DiscardHandler), opts: Options{BatchSize: 512, Now: time.Now}}
	d := &driver{r: r, run: rec, ctx: ctx, notify: make(chan struct{})}
	d.stored, d.lastSeq, d.vseq, d.limit = last, last, 1, limit
	return d
}

func (s *sinkRun) events() []event.Event {
	s.t.Helper()
	evs, err := s.st.ReadEvents(s.t.Context(), s.id, 0, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []event.Event
	for _, e := range evs {
		ev, err := event.Unmarshal(e.Data)
		if err != nil {
			s.t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// text is the concatenated content of the message's deltas.
func text(evs []event.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == event.TextMessageContent {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

func count(evs []event.Event, pred func(event.Event) bool) int {
	n := 0
	for _, e := range evs {
		if pred(e) {
			n++
		}
	}
	return n
}

// script is a run's translated events: a start, n deltas of one message
// (line i), an end.
func script(n int) []event.Event {
	evs := []event.Event{{Type: event.RunStarted, RunID: "run-s"}, {Type: event.TextMessageStart, MessageID: "m1", Role: "assistant"}}
	for i := 1; i <= n; i++ {
		evs = append(evs, event.Event{Type: event.TextMessageContent, MessageID: "m1", Delta: fmt.Sprintf("line %d\n", i)})
	}
	return append(evs, event.Event{Type: event.TextMessageEnd, MessageID: "m1"})
}

// rechunk cuts and joins the deltas of evs at random, as another reader's
// pieces or another translator's boundaries would: same content, other
// events.
func rechunk(evs []event.Event, rnd *rand.Rand) []event.Event {
	var out []event.Event
	var acc strings.Builder
	flush := func() {
		if acc.Len() > 0 {
			out = append(out, event.Event{Type: event.TextMessageContent, MessageID: "m1", Delta: acc.String()})
			acc.Reset()
		}
	}
	for _, e := range evs {
		if e.Type != event.TextMessageContent {
			flush()
			out = append(out, e)
			continue
		}
		d := e.Delta
		for d != "" {
			n := 1 + rnd.IntN(len(d))
			acc.WriteString(d[:n])
			d = d[n:]
			if rnd.IntN(3) == 0 {
				flush()
			}
		}
	}
	flush()
	return out
}

// feedAll emits evs through d, appending at random points (flush windows
// of varying length); final events go through emitFinal.
func feedAll(t *testing.T, d *driver, evs []event.Event, rnd *rand.Rand, stopAfter int) {
	t.Helper()
	for i, e := range evs {
		if i == stopAfter {
			break
		}
		if err := d.emit([]event.Event{e}); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if rnd.IntN(500) == 0 || d.flushDue(false) {
			if err := d.flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestCoalescedReplay writes a flood of deltas, coalesced in random flush
// windows, stops mid-way (a detach), and replays the same content cut
// into other deltas: nothing diverges, no byte repeats, every byte is
// there, and the log holds far fewer events than deltas.
func TestCoalescedReplay(t *testing.T) {
	s := newSinkRun(t)
	want := script(20000)
	rnd := rand.New(rand.NewPCG(5, 6))
	a := s.driver(-1)
	feedAll(t, a, want, rnd, 15000)
	stored := len(s.events())

	b := s.driver(-1)
	feedAll(t, b, rechunk(want, rnd), rnd, -1)
	b.emitFinal([]event.Event{{Type: event.RunFinished, RunID: "run-s"}})
	if err := b.flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := s.events()
	if text(got) != text(want) {
		t.Fatalf("the log's text differs: %d bytes, want %d", len(text(got)), len(text(want)))
	}
	deltas := count(got, func(e event.Event) bool { return e.Type == event.TextMessageContent })
	if deltas >= 20000/2 || got[len(got)-1].Type != event.RunFinished || got[len(got)-2].Type != event.TextMessageEnd {
		t.Errorf("%d content events for 20000 deltas; last two %s %s", deltas, got[len(got)-2].Type, got[len(got)-1].Type)
	}
	t.Logf("20000 deltas (%d bytes): %d events stored before the detach, %d in all (%d content events)", len(text(want)), stored, len(got), deltas)

	// A third replay of the whole log, cut yet another way, adds nothing.
	c := s.driver(-1)
	feedAll(t, c, rechunk(want, rnd), rnd, -1)
	if n := len(s.events()); n != len(got) || len(c.pending) != 0 {
		t.Errorf("a full replay appended %d events", n-len(got))
	}
}

// TestReplayDivergence checks that a replay that contradicts the log is
// errDiverged, naming the event and both types.
func TestReplayDivergence(t *testing.T) {
	for name, change := range map[string]func([]event.Event){
		"text":      func(evs []event.Event) { evs[50].Delta = "line X\n" },
		"structure": func(evs []event.Event) { evs[len(evs)-1] = event.Event{Type: event.ToolCallStart, ToolCallID: "t"} },
		"stream":    func(evs []event.Event) { evs[10].MessageID = "m2" },
	} {
		t.Run(name, func(t *testing.T) {
			s := newSinkRun(t)
			want := script(100)
			rnd := rand.New(rand.NewPCG(7, 8))
			feedAll(t, s.driver(-1), want, rnd, -1)
			changed := append([]event.Event(nil), want...)
			change(changed)
			b := s.driver(-1)
			var err error
			for _, e := range changed {
				if err = b.emit([]event.Event{e}); err != nil {
					break
				}
			}
			var div *divergence
			if !errors.Is(err, errDiverged) || !errors.As(err, &div) || !strings.Contains(err.Error(), "at event ") {
				t.Fatalf("replay: %v, want a divergence", err)
			}
			t.Logf("%v", err)
		})
	}
}

// TestCapTruncates checks the cap: one output.truncated event, the text
// cut at the cap, every structural event after it kept; and that a replay
// by a process with another cap adopts the stored truncation.
func TestCapTruncates(t *testing.T) {
	const limit = 10_000
	evs := script(2000)
	evs = append(evs[:len(evs)-1], event.Event{Type: event.ToolCallStart, ToolCallID: "t1", ToolCallName: "x"},
		event.Event{Type: event.ToolCallArgs, ToolCallID: "t1", Delta: `{"a":1}`}, event.Event{Type: event.ToolCallEnd, ToolCallID: "t1"},
		event.Event{Type: event.ToolCallResult, ToolCallID: "t1", Content: "big result"}, evs[len(evs)-1],
		event.Event{Type: event.RunFinished, RunID: "run-s"})

	check := func(t *testing.T, got []event.Event) {
		t.Helper()
		truncs := count(got, func(e event.Event) bool { return e.Name == event.OutputTruncated })
		if truncs != 1 {
			t.Fatalf("%d truncation events", truncs)
		}
		var tr event.Truncation
		for _, e := range got {
			if e.Name == event.OutputTruncated {
				_ = json.Unmarshal(e.Value, &tr)
			}
		}
		kept := text(got)
		if !strings.HasPrefix(text(evs), kept) || len(kept) == 0 || tr.Reason != event.TruncatedCap || tr.BytesKept > limit || tr.Limit != limit {
			t.Errorf("kept %d bytes (a prefix: %v), truncation %+v", len(kept), strings.HasPrefix(text(evs), kept), tr)
		}
		for _, ty := range []event.Type{event.ToolCallStart, event.ToolCallEnd, event.ToolCallResult, event.TextMessageEnd, event.RunFinished} {
			if count(got, func(e event.Event) bool { return e.Type == ty }) != 1 {
				t.Errorf("no %s after the cap", ty)
			}
		}
		if count(got, func(e event.Event) bool { return e.Type == event.ToolCallArgs || e.Content != "" }) != 0 {
			t.Error("content recorded after the cap")
		}
		if got[len(got)-1].Type != event.RunFinished {
			t.Errorf("last event %s", got[len(got)-1].Type)
		}
	}
	run := func(t *testing.T, s *sinkRun, d *driver, evs []event.Event, rnd *rand.Rand, stop int) {
		t.Helper()
		feedAll(t, d, evs[:len(evs)-1], rnd, stop)
		if stop < 0 {
			d.emitFinal(evs[len(evs)-1:])
			if err := d.flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	rnd := rand.New(rand.NewPCG(9, 10))

	t.Run("one driver", func(t *testing.T) {
		s := newSinkRun(t)
		run(t, s, s.driver(limit), evs, rnd, -1)
		got := s.events()
		check(t, got)
		t.Logf("%d events, %d text bytes kept of %d", len(got), len(text(got)), len(text(evs)))
	})
	t.Run("detach before the cap, same cap", func(t *testing.T) {
		one := newSinkRun(t)
		run(t, one, one.driver(limit), evs, rnd, -1)
		s := newSinkRun(t)
		run(t, s, s.driver(limit), evs, rnd, 300)
		run(t, s, s.driver(limit), rechunk(evs, rnd), rnd, -1)
		got := s.events()
		check(t, got)
		if text(got) != text(one.events()) {
			t.Errorf("kept %d bytes, one driver kept %d", len(text(got)), len(text(one.events())))
		}
	})
	t.Run("detach after the cap, replay with no cap", func(t *testing.T) {
		s := newSinkRun(t)
		run(t, s, s.driver(limit), evs, rnd, 1800)
		run(t, s, s.driver(-1), rechunk(evs, rnd), rnd, -1)
		check(t, s.events())
	})
}

// TestJSONLen checks jsonLen and cutJSON against encoding/json.
func TestJSONLen(t *testing.T) {
	for _, s := range []string{"", "abc", "\x00\x01\n\t\"\\", "<&>", "ü€😀", "\u2028x", "bad\xff\xfeutf8", strings.Repeat("\x00", 1000)} {
		b, _ := json.Marshal(s)
		if got := jsonLen(s); got != len(b)-2 {
			t.Errorf("jsonLen(%q) = %d, json writes %d", s, got, len(b)-2)
		}
		for budget := int64(0); budget <= int64(len(b)); budget++ {
			head := cutJSON(validUTF8(s), budget)
			if int64(jsonLen(head)) > budget || !strings.HasPrefix(validUTF8(s), head) {
				t.Fatalf("cutJSON(%q, %d) = %q", s, budget, head)
			}
		}
	}
}

// TestFirstContentFlushedAtOnce: with the clock standing still inside one
// flush interval, an idle batch of opening (non-content) events waits for
// the interval, the run's first content does not, and later content waits
// again (a steady stream makes at most one append per interval).
func TestFirstContentFlushedAtOnce(t *testing.T) {
	s := newSinkRun(t)
	d := s.driver(0)
	now := time.Unix(1000, 0)
	d.r.opts.Now = func() time.Time { return now }
	d.r.opts.FlushInterval = time.Second
	steps := []struct {
		name string
		ev   event.Event
		want bool
	}{
		{"a message start just after an append", event.Event{Type: event.TextMessageStart, MessageID: "m", Role: "assistant"}, false},
		{"the first text", event.Event{Type: event.TextMessageContent, MessageID: "m", Delta: "hi"}, true},
		{"the next text in the same interval", event.Event{Type: event.TextMessageContent, MessageID: "m", Delta: " there"}, false},
	}
	if err := d.emit([]event.Event{{Type: event.RunStarted}}); err != nil {
		t.Fatal(err)
	}
	if err := d.flush(t.Context()); err != nil { // the opening events' append
		t.Fatal(err)
	}
	for _, st := range steps {
		if err := d.emit([]event.Event{st.ev}); err != nil {
			t.Fatal(err)
		}
		if got := d.flushDue(true); got != st.want {
			t.Fatalf("%s: flushDue = %v, want %v", st.name, got, st.want)
		}
		if st.want {
			if err := d.flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d.flushDue(false) {
		t.Error("a batch with more lines waiting is due before it is full")
	}
	now = now.Add(time.Second)
	if !d.flushDue(true) {
		t.Error("the interval is over and the batch is not due")
	}
}
