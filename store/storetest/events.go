package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// RunEventLog checks the EventLog contract.
func RunEventLog(t *testing.T, h Harness) {
	t.Run("AppendRead", func(t *testing.T) { testEventsAppendRead(t, h) })
	t.Run("SeqRules", func(t *testing.T) { testEventsSeqRules(t, h) })
	t.Run("AtomicBatch", func(t *testing.T) { testEventsAtomicBatch(t, h) })
	t.Run("EpochFence", func(t *testing.T) { testEventsEpochFence(t, h) })
	t.Run("Close", func(t *testing.T) { testEventsClose(t, h) })
	t.Run("MissingRun", func(t *testing.T) { testEventsMissingRun(t, h) })
	t.Run("Size", func(t *testing.T) { testEventsSize(t, h) })
	t.Run("ConcurrentAppenders", func(t *testing.T) { testEventsConcurrent(t, h) })
}

func evs(kind string, n int) []store.NewEvent {
	out := make([]store.NewEvent, n)
	for i := range out {
		out[i] = store.NewEvent{Type: kind, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	return out
}

func readAll(t *testing.T, s store.EventLog, runID string) []store.Event {
	t.Helper()
	out, err := s.ReadEvents(t.Context(), runID, 0, 0)
	must(t, err, "ReadEvents "+runID)
	for i, e := range out {
		if e.Seq != int64(i+1) || e.RunID != runID {
			t.Fatalf("event %d reads RunID %q seq %d: want %q, dense from 1", i, e.RunID, e.Seq, runID)
		}
		checkUTCms(t, e.Time, "event Time")
	}
	return out
}

func lastSeq(t *testing.T, s store.EventLog, runID string) int64 {
	t.Helper()
	n, err := s.LastSeq(t.Context(), runID)
	must(t, err, "LastSeq "+runID)
	return n
}

func testEventsAppendRead(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	createRun(t, s, store.Run{ID: "r", ThreadID: "th"})
	if n := lastSeq(t, s, "r"); n != 0 {
		t.Fatalf("LastSeq of an empty log = %d", n)
	}
	if got := readAll(t, s, "r"); len(got) != 0 {
		t.Fatalf("ReadEvents of an empty log: %d events", len(got))
	}
	when := time.UnixMilli(1_700_000_000_123).Add(777 * time.Microsecond)
	// Bytes survive as given: whitespace, key order, unicode, big numbers.
	raw := json.RawMessage("{ \"b\": 1,  \"a\": [true, null], \"ü\": \"✓\", \"n\": 12345678901234567890 }")
	batch := []store.NewEvent{
		{Type: "run.accepted", Data: json.RawMessage(`{}`), Time: when},
		{Type: "text", Data: raw},
		{Type: "no-data"},
	}
	before := time.Now().Add(-time.Millisecond)
	must(t, s.AppendEvents(ctx, "r", 0, 1, batch), "AppendEvents")
	after := time.Now().Add(time.Millisecond)
	must(t, s.AppendEvents(ctx, "r", 0, 4, evs("more", 2)), "AppendEvents (second batch)")

	got := readAll(t, s, "r")
	if len(got) != 5 {
		t.Fatalf("read %d events, want 5", len(got))
	}
	if got[0].Type != "run.accepted" || string(got[0].Data) != "{}" || !got[0].Time.Equal(store.Millis(when)) {
		t.Errorf("event 1 = %+v", got[0])
	}
	if string(got[1].Data) != string(raw) {
		t.Errorf("event 2 Data = %s, want the bytes appended: %s", got[1].Data, raw)
	}
	if got[1].Time.Before(before) || got[1].Time.After(after) {
		t.Errorf("event 2 without a Time got %v, want the time of the append", got[1].Time)
	}
	if got[2].Type != "no-data" || got[2].Data != nil {
		t.Errorf("event 3 = %+v, want nil Data", got[2])
	}
	if got[4].Type != "more" || string(got[4].Data) != `{"i":1}` {
		t.Errorf("event 5 = %+v", got[4])
	}
	if n := lastSeq(t, s, "r"); n != 5 {
		t.Fatalf("LastSeq = %d, want 5", n)
	}

	page, err := s.ReadEvents(ctx, "r", 2, 2)
	must(t, err, "ReadEvents(after 2, limit 2)")
	if len(page) != 2 || page[0].Seq != 3 || page[1].Seq != 4 {
		t.Fatalf("ReadEvents(after 2, limit 2) = %v", page)
	}
	tail, err := s.ReadEvents(ctx, "r", 5, 0)
	must(t, err, "ReadEvents(after last)")
	if len(tail) != 0 {
		t.Fatalf("ReadEvents after the last seq: %d events", len(tail))
	}
	_, err = s.ReadEvents(ctx, "r", 0, -1)
	wantCode(t, err, sandbox.InvalidArgument, "ReadEvents(limit -1)")

	// Events of another run are separate.
	createRun(t, s, store.Run{ID: "r2", ThreadID: "th"})
	must(t, s.AppendEvents(ctx, "r2", 0, 1, evs("x", 1)), "AppendEvents r2")
	if n := lastSeq(t, s, "r2"); n != 1 {
		t.Fatalf("LastSeq r2 = %d", n)
	}
	if n := lastSeq(t, s, "r"); n != 5 {
		t.Fatalf("LastSeq r after appending to r2 = %d", n)
	}
}

func testEventsSeqRules(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	createRun(t, s, store.Run{ID: "r", ThreadID: "th"})
	must(t, s.AppendEvents(ctx, "r", 0, 1, evs("a", 3)), "AppendEvents")

	// A double append (the same batch again) is refused, never duplicated.
	wantCode(t, s.AppendEvents(ctx, "r", 0, 1, evs("a", 3)), sandbox.AlreadyExists, "append at seq 1 again")
	wantCode(t, s.AppendEvents(ctx, "r", 0, 3, evs("a", 2)), sandbox.AlreadyExists, "append overlapping the last seq")
	wantCode(t, s.AppendEvents(ctx, "r", 0, 5, evs("a", 1)), sandbox.FailedPrecondition, "append leaving a gap")
	wantCode(t, s.AppendEvents(ctx, "r", 0, 0, evs("a", 1)), sandbox.InvalidArgument, "append at seq 0")
	if got := readAll(t, s, "r"); len(got) != 3 {
		t.Fatalf("%d events after refused appends, want 3", len(got))
	}
	must(t, s.AppendEvents(ctx, "r", 0, 4, evs("b", 1)), "AppendEvents at last+1")
	// An empty batch checks the fences only.
	must(t, s.AppendEvents(ctx, "r", 0, 5, nil), "empty append")
	if n := lastSeq(t, s, "r"); n != 4 {
		t.Fatalf("LastSeq = %d, want 4", n)
	}
}

// testEventsAtomicBatch: a batch with one bad event stores none of them.
func testEventsAtomicBatch(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	createRun(t, s, store.Run{ID: "r", ThreadID: "th"})
	must(t, s.AppendEvents(ctx, "r", 0, 1, evs("a", 1)), "AppendEvents")
	bad := evs("b", 4)
	bad[2].Data = json.RawMessage(`{"unterminated":`)
	wantCode(t, s.AppendEvents(ctx, "r", 0, 2, bad), sandbox.InvalidArgument, "append with invalid JSON")
	bad = evs("b", 4)
	bad[3].Type = ""
	wantCode(t, s.AppendEvents(ctx, "r", 0, 2, bad), sandbox.InvalidArgument, "append with an untyped event")
	if got := readAll(t, s, "r"); len(got) != 1 {
		t.Fatalf("%d events after refused batches, want 1: a batch must land whole or not at all", len(got))
	}
	// A large batch lands whole.
	must(t, s.AppendEvents(ctx, "r", 0, 2, evs("big", 500)), "AppendEvents(500)")
	if n := lastSeq(t, s, "r"); n != 501 {
		t.Fatalf("LastSeq = %d, want 501", n)
	}
}

func testEventsEpochFence(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	createRun(t, s, store.Run{ID: "r", ThreadID: "th"})
	must(t, s.AppendEvents(ctx, "r", 0, 1, evs("e0", 2)), "append at epoch 0")
	_, err := s.ClaimRun(ctx, "r", 0)
	must(t, err, "ClaimRun")
	// The superseded writer (epoch 0) is refused; the claimer (1) is not.
	wantCode(t, s.AppendEvents(ctx, "r", 0, 3, evs("e0", 1)), sandbox.FailedPrecondition, "append by a superseded epoch")
	wantCode(t, s.AppendEvents(ctx, "r", 2, 3, evs("e2", 1)), sandbox.FailedPrecondition, "append by a future epoch")
	must(t, s.AppendEvents(ctx, "r", 1, 3, evs("e1", 1)), "append at the current epoch")
	got := readAll(t, s, "r")
	if len(got) != 3 || got[2].Type != "e1" {
		t.Fatalf("log after the fence: %v", got)
	}
}

func testEventsClose(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	createRun(t, s, store.Run{ID: "r", ThreadID: "th", DriverEpoch: 1})
	must(t, s.AppendEvents(ctx, "r", 1, 1, evs("a", 2)), "AppendEvents")
	closed, err := s.LogClosed(ctx, "r")
	must(t, err, "LogClosed")
	if closed {
		t.Fatal("a fresh log reads closed")
	}
	wantCode(t, s.CloseLog(ctx, "r", 0), sandbox.FailedPrecondition, "CloseLog by a superseded epoch")
	if closed, _ := s.LogClosed(ctx, "r"); closed {
		t.Fatal("a fenced CloseLog closed the log")
	}
	must(t, s.CloseLog(ctx, "r", 1), "CloseLog")
	must(t, s.CloseLog(ctx, "r", 1), "CloseLog again")
	must(t, s.CloseLog(ctx, "r", 0), "CloseLog of a closed log, any epoch")
	closed, err = s.LogClosed(ctx, "r")
	must(t, err, "LogClosed")
	if !closed {
		t.Fatal("the log does not read closed after CloseLog")
	}
	wantCode(t, s.AppendEvents(ctx, "r", 1, 3, evs("late", 1)), sandbox.FailedPrecondition, "append after close")
	if got := readAll(t, s, "r"); len(got) != 2 {
		t.Fatalf("%d events after close, want 2", len(got))
	}
	// A claim after close does not reopen the log.
	_, err = s.ClaimRun(ctx, "r", 1)
	must(t, err, "ClaimRun")
	wantCode(t, s.AppendEvents(ctx, "r", 2, 3, evs("late", 1)), sandbox.FailedPrecondition, "append after close, new epoch")
}

func testEventsMissingRun(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	wantCode(t, s.AppendEvents(ctx, "missing", 0, 1, evs("a", 1)), sandbox.NotFound, "AppendEvents(missing run)")
	_, err := s.ReadEvents(ctx, "missing", 0, 0)
	wantCode(t, err, sandbox.NotFound, "ReadEvents(missing run)")
	_, err = s.LastSeq(ctx, "missing")
	wantCode(t, err, sandbox.NotFound, "LastSeq(missing run)")
	wantCode(t, s.CloseLog(ctx, "missing", 0), sandbox.NotFound, "CloseLog(missing run)")
	_, err = s.LogClosed(ctx, "missing")
	wantCode(t, err, sandbox.NotFound, "LogClosed(missing run)")
	_, err = s.LogSize(ctx, "missing")
	wantCode(t, err, sandbox.NotFound, "LogSize(missing run)")
}

// testEventsSize: LogSize is the sum of the stored events' Data lengths;
// refused appends do not move it; it is per run and survives a reopen.
func testEventsSize(t *testing.T, h Harness) {
	b := h.open(t)
	s := b.Store
	ctx := t.Context()
	size := func(id string) int64 {
		t.Helper()
		n, err := s.LogSize(ctx, id)
		must(t, err, "LogSize "+id)
		return n
	}
	createRun(t, s, store.Run{ID: "r", ThreadID: "th"})
	createRun(t, s, store.Run{ID: "r2", ThreadID: "th"})
	if n := size("r"); n != 0 {
		t.Fatalf("LogSize of an empty log = %d", n)
	}
	batch := []store.NewEvent{{Type: "a", Data: json.RawMessage(`{"x":"hello"}`)}, {Type: "b"}, {Type: "c", Data: json.RawMessage(`[1,2,3]`)}}
	want := int64(len(batch[0].Data) + len(batch[2].Data))
	must(t, s.AppendEvents(ctx, "r", 0, 1, batch), "AppendEvents")
	if n := size("r"); n != want {
		t.Fatalf("LogSize = %d, want %d", n, want)
	}
	wantCode(t, s.AppendEvents(ctx, "r", 0, 1, batch), sandbox.AlreadyExists, "double append")
	bad := evs("b", 3)
	bad[2].Data = json.RawMessage(`{`)
	wantCode(t, s.AppendEvents(ctx, "r", 0, 4, bad), sandbox.InvalidArgument, "bad batch")
	wantCode(t, s.AppendEvents(ctx, "r", 7, 4, evs("b", 1)), sandbox.FailedPrecondition, "superseded epoch")
	if n := size("r"); n != want {
		t.Fatalf("LogSize after refused appends = %d, want %d", n, want)
	}
	big := evs("big", 300)
	for _, e := range big {
		want += int64(len(e.Data))
	}
	must(t, s.AppendEvents(ctx, "r", 0, 4, big), "AppendEvents(300)")
	if n := size("r"); n != want {
		t.Fatalf("LogSize = %d, want %d", n, want)
	}
	if n := size("r2"); n != 0 {
		t.Fatalf("LogSize of another run = %d", n)
	}
	if b.Reopen != nil {
		if n, err := b.Reopen(t).LogSize(ctx, "r"); err != nil || n != want {
			t.Fatalf("LogSize after reopen = %d, %v; want %d", n, err, want)
		}
	}
}

// testEventsConcurrent: 8 drivers on two handles take the run over one
// after another, each claiming while its predecessor is still appending
// two-event batches as fast as it can. Only the current epoch's appends may
// land: the log stays dense, has no duplicates, its batches are whole, the
// epochs along it never go down, and nothing written by an older epoch
// lands after a newer epoch's claim (checked against the last seq each
// driver saw right after its claim).
func testEventsConcurrent(t *testing.T, h Harness) {
	b := h.open(t)
	stores := []store.Store{b.Store, b.second(t)}
	createRun(t, b.Store, store.Run{ID: "r", ThreadID: "th"})
	ctx := ctxFor(t, 2*time.Minute)
	const drivers, maxBatches, step = 8, 30, 20

	type claim struct{ epoch, seenLast int64 }
	claims := make([]claim, drivers)
	var wg sync.WaitGroup
	errs := make(chan error, drivers)
	for d := range drivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[d%2]
			// Wait for the predecessor to be busy appending.
			for {
				last, err := s.LastSeq(ctx, "r")
				if err != nil {
					errs <- err
					return
				}
				if last >= int64(d*step) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			// Claim: retry the CAS until this driver holds the current epoch.
			var epoch int64
			for {
				r, _, err := s.GetRun(ctx, "r")
				if err != nil {
					errs <- err
					return
				}
				r, err = s.ClaimRun(ctx, "r", r.DriverEpoch)
				if err == nil {
					epoch = r.DriverEpoch
					break
				}
				if sandbox.CodeOf(err) != sandbox.FailedPrecondition {
					errs <- err
					return
				}
			}
			seen, err := s.LastSeq(ctx, "r")
			if err != nil {
				errs <- err
				return
			}
			claims[d] = claim{epoch, seen}
			for n := 0; n < maxBatches; {
				last, err := s.LastSeq(ctx, "r")
				if err != nil {
					errs <- err
					return
				}
				batch := []store.NewEvent{
					{Type: "ev", Data: json.RawMessage(fmt.Sprintf(`{"epoch":%d,"batch":%d,"part":0}`, epoch, n))},
					{Type: "ev", Data: json.RawMessage(fmt.Sprintf(`{"epoch":%d,"batch":%d,"part":1}`, epoch, n))},
				}
				err = s.AppendEvents(ctx, "r", epoch, last+1, batch)
				switch sandbox.CodeOf(err) {
				case sandbox.OK:
					n++
				case sandbox.AlreadyExists:
					// The log moved between LastSeq and the append: re-read.
				case sandbox.FailedPrecondition:
					return // superseded
				default:
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("driver: %v", err)
	}

	final := getRun(t, b.Store, "r")
	if final.DriverEpoch != drivers {
		t.Fatalf("DriverEpoch %d after %d claims", final.DriverEpoch, drivers)
	}
	got := readAll(t, b.Store, "r") // checks density from 1
	if len(got)%2 != 0 {
		t.Fatalf("%d events: a two-event batch landed in part", len(got))
	}
	type payload struct{ Epoch, Batch, Part int64 }
	epochAt := make([]int64, len(got)+1) // by seq
	seen := map[[2]int64]bool{}
	var prevEpoch int64
	for i := 0; i < len(got); i += 2 {
		var p0, p1 payload
		if err := json.Unmarshal(got[i].Data, &p0); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got[i+1].Data, &p1); err != nil {
			t.Fatal(err)
		}
		if p0.Part != 0 || p1.Part != 1 || p0.Epoch != p1.Epoch || p0.Batch != p1.Batch {
			t.Fatalf("seq %d-%d hold %+v and %+v: not one whole batch", got[i].Seq, got[i+1].Seq, p0, p1)
		}
		if p0.Epoch < prevEpoch {
			t.Fatalf("seq %d was written at epoch %d after epoch %d had written: a superseded writer appended", got[i].Seq, p0.Epoch, prevEpoch)
		}
		prevEpoch = p0.Epoch
		key := [2]int64{p0.Epoch, p0.Batch}
		if seen[key] {
			t.Fatalf("batch %v stored twice", key)
		}
		seen[key] = true
		epochAt[got[i].Seq], epochAt[got[i+1].Seq] = p0.Epoch, p1.Epoch
	}
	for _, c := range claims {
		for seq := c.seenLast + 1; seq < int64(len(epochAt)); seq++ {
			if epochAt[seq] < c.epoch {
				t.Fatalf("seq %d was written at epoch %d after the claim of epoch %d (which saw last seq %d): the append fence let a superseded writer through",
					seq, epochAt[seq], c.epoch, c.seenLast)
			}
		}
	}
	if prevEpoch != drivers || !seen[[2]int64{drivers, maxBatches - 1}] {
		t.Fatalf("the final driver (epoch %d) did not write all its batches; last epoch in the log %d", drivers, prevEpoch)
	}
}
