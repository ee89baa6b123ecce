package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// RunForgetter runs the retention cases: what ForgetRun keeps of an ended
// run in each mode, what PruneEvents deletes, and what neither may touch.
func RunForgetter(t *testing.T, h Harness) {
	t.Run("Modes", func(t *testing.T) { testForgetModes(t, h) })
	t.Run("Refusals", func(t *testing.T) { testForgetRefusals(t, h) })
	t.Run("List", func(t *testing.T) { testForgettableList(t, h) })
	t.Run("PruneEvents", func(t *testing.T) { testPruneEvents(t, h) })
}

// secretPrompt and secretText are what no forgetting mode may leave.
const (
	secretPrompt = "the prompt: fix acme-secret-42"
	secretText   = "the answer mentions acme-secret-42"
)

// endedRun creates run id with retention mode, three events that carry
// secretText and a structural one, and ends it.
func endedRun(t *testing.T, s store.Store, id, thread string, mode store.Retention, finished time.Time) {
	t.Helper()
	ctx := t.Context()
	createRun(t, s, store.Run{ID: id, ThreadID: thread, Prompt: secretPrompt, Retention: mode})
	must(t, s.AppendEvents(ctx, id, 0, 1, []store.NewEvent{
		{Type: "TEXT_MESSAGE_CONTENT", Data: json.RawMessage(fmt.Sprintf(`{"delta":%q}`, secretText))},
		{Type: "CUSTOM", Data: json.RawMessage(`{"name":"session.started","value":{"id":"sess-1"}}`)},
		{Type: "RUN_ERROR", Data: json.RawMessage(fmt.Sprintf(`{"message":%q,"code":"exit"}`, secretText))},
	}), "AppendEvents "+id)
	must(t, s.CloseLog(ctx, id, 0), "CloseLog "+id)
	_, err := s.UpdateRun(ctx, id, store.RunPatch{Status: store.Set(store.RunFailed), FinishedAt: store.Set(finished),
		Error: store.Set(secretText), ExitCode: store.Set(3)})
	must(t, err, "UpdateRun "+id)
}

// keepSession keeps session.started payloads and nothing else.
func keepSession(e store.Event) json.RawMessage {
	var c struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(e.Data, &c) == nil && c.Name == "session.started" {
		return e.Data
	}
	return nil
}

func testForgetModes(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	at := time.UnixMilli(1_700_000_000_000).UTC()
	for _, mode := range []store.Retention{"", store.RetainAll, store.RetainSandbox, store.RetainNone} {
		id := "r-" + string(mode)
		endedRun(t, s, id, "th", mode, at)
		must(t, s.ForgetRun(ctx, id, keepSession), "ForgetRun "+id)
		if err := s.ForgetRun(ctx, id, keepSession); mode == store.RetainNone {
			wantCode(t, err, sandbox.NotFound, "ForgetRun of a deleted run")
		} else {
			must(t, err, "ForgetRun again "+id) // a no-op
		}
		r, ok, err := s.GetRun(ctx, id)
		must(t, err, "GetRun "+id)
		switch mode {
		case "", store.RetainAll:
			if !ok || r.Prompt != secretPrompt || r.Error != secretText || !r.ForgottenAt.IsZero() {
				t.Fatalf("mode %q: run after ForgetRun = %s, ok %v: want it whole", mode, fmtRun(r), ok)
			}
			if got := readAll(t, s, id); len(got) != 3 || string(got[0].Data) != fmt.Sprintf(`{"delta":%q}`, secretText) {
				t.Fatalf("mode %q: events changed: %v", mode, got)
			}
		case store.RetainSandbox:
			if !ok {
				t.Fatalf("mode sandbox: the run record is gone")
			}
			if r.Prompt != "" || r.Error != "" || r.ForgottenAt.IsZero() || r.Retention != store.RetainSandbox {
				t.Fatalf("mode sandbox: run = %s retention %q forgotten %s: want no prompt, no error, forgotten", fmtRun(r), r.Retention, fmtTime(r.ForgottenAt))
			}
			if r.Status != store.RunFailed || r.ExitCode == nil || *r.ExitCode != 3 || !r.FinishedAt.Equal(at) || r.ThreadID != "th" {
				t.Fatalf("mode sandbox: the sandbox side of the run changed: %s", fmtRun(r))
			}
			got := readAll(t, s, id)
			if len(got) != 3 || got[0].Type != "TEXT_MESSAGE_CONTENT" || got[0].Data != nil || got[2].Data != nil ||
				string(got[1].Data) != `{"name":"session.started","value":{"id":"sess-1"}}` {
				t.Fatalf("mode sandbox: events = %v: want types and seqs kept, only the session payload", got)
			}
			if n, err := s.LogSize(ctx, id); err != nil || n != int64(len(got[1].Data)) {
				t.Fatalf("mode sandbox: LogSize = %d, %v: want %d", n, err, len(got[1].Data))
			}
			if n := lastSeq(t, s, id); n != 3 {
				t.Fatalf("mode sandbox: LastSeq = %d, want 3", n)
			}
		case store.RetainNone:
			if ok {
				t.Fatalf("mode none: the run is still there: %s", fmtRun(r))
			}
			_, err := s.ReadEvents(ctx, id, 0, 0)
			wantCode(t, err, sandbox.NotFound, "mode none: ReadEvents")
		}
	}
	// Nothing else was touched: runs of other threads and live runs stay.
	runs, err := s.ListRuns(ctx, store.RunFilter{})
	must(t, err, "ListRuns")
	if len(runs) != 3 {
		t.Fatalf("ListRuns after forgetting = %d runs, want 3 (all, \"\", sandbox)", len(runs))
	}
}

func testForgetRefusals(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	wantCode(t, s.ForgetRun(ctx, "nope", nil), sandbox.NotFound, "ForgetRun of a missing run")
	createRun(t, s, store.Run{ID: "live", ThreadID: "th", Prompt: secretPrompt, Retention: store.RetainNone})
	wantCode(t, s.ForgetRun(ctx, "live", nil), sandbox.FailedPrecondition, "ForgetRun of a live run")
	if r, ok, err := s.GetRun(ctx, "live"); err != nil || !ok || r.Prompt != secretPrompt {
		t.Fatalf("a refused ForgetRun changed the run: %s ok %v err %v", fmtRun(r), ok, err)
	}
	err := s.CreateRun(ctx, store.Run{ID: "bad", ThreadID: "th", Retention: "forever"})
	wantCode(t, err, sandbox.InvalidArgument, "CreateRun with retention forever")
	// A nil keep function keeps no payload at all.
	endedRun(t, s, "nil-keep", "th", store.RetainSandbox, time.UnixMilli(1_700_000_000_000))
	must(t, s.ForgetRun(ctx, "nil-keep", nil), "ForgetRun nil keep")
	for _, e := range readAll(t, s, "nil-keep") {
		if e.Data != nil {
			t.Fatalf("nil keep left payload %s on seq %d", e.Data, e.Seq)
		}
	}
	// A keep function returning invalid JSON stores no payload.
	endedRun(t, s, "bad-keep", "th", store.RetainSandbox, time.UnixMilli(1_700_000_000_000))
	must(t, s.ForgetRun(ctx, "bad-keep", func(store.Event) json.RawMessage { return json.RawMessage(`{"x":`) }), "ForgetRun bad keep")
	for _, e := range readAll(t, s, "bad-keep") {
		if e.Data != nil {
			t.Fatalf("invalid kept JSON stored as %s on seq %d", e.Data, e.Seq)
		}
	}
}

func testForgettableList(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	base := time.UnixMilli(1_700_000_000_000).UTC()
	endedRun(t, s, "b", "th", store.RetainSandbox, base.Add(2*time.Second))
	endedRun(t, s, "a", "th", store.RetainNone, base.Add(1*time.Second))
	endedRun(t, s, "c", "th", store.RetainSandbox, base.Add(5*time.Second))
	endedRun(t, s, "keep", "th", store.RetainAll, base)
	createRun(t, s, store.Run{ID: "live", ThreadID: "th", Retention: store.RetainNone})
	ids := func(rs []store.Run) (out []string) {
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	got, err := s.ListForgettable(ctx, base.Add(3*time.Second), 0)
	must(t, err, "ListForgettable")
	if fmt.Sprint(ids(got)) != "[a b]" {
		t.Fatalf("ListForgettable = %v, want [a b] (oldest finish first; not c, finished later; not keep or live)", ids(got))
	}
	got, err = s.ListForgettable(ctx, base.Add(time.Hour), 1)
	must(t, err, "ListForgettable limit 1")
	if fmt.Sprint(ids(got)) != "[a]" {
		t.Fatalf("ListForgettable limit 1 = %v, want [a]", ids(got))
	}
	must(t, s.ForgetRun(ctx, "b", nil), "ForgetRun b")
	got, err = s.ListForgettable(ctx, base.Add(time.Hour), 0)
	must(t, err, "ListForgettable after forgetting b")
	if fmt.Sprint(ids(got)) != "[a c]" {
		t.Fatalf("ListForgettable after forgetting b = %v, want [a c]", ids(got))
	}
	_, err = s.ListForgettable(ctx, base, -1)
	wantCode(t, err, sandbox.InvalidArgument, "ListForgettable limit -1")
}

func testPruneEvents(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	base := time.UnixMilli(1_700_000_000_000).UTC()
	endedRun(t, s, "old1", "th", "", base)
	endedRun(t, s, "old2", "th", "", base.Add(time.Second))
	endedRun(t, s, "new", "th", "", base.Add(time.Hour))
	createRun(t, s, store.Run{ID: "live", ThreadID: "th"})
	must(t, s.AppendEvents(ctx, "live", 0, 1, evs("X", 2)), "AppendEvents live")
	n, err := s.PruneEvents(ctx, base.Add(time.Minute), 1)
	must(t, err, "PruneEvents limit 1")
	if n != 1 {
		t.Fatalf("PruneEvents limit 1 = %d, want 1", n)
	}
	n, err = s.PruneEvents(ctx, base.Add(time.Minute), 0)
	must(t, err, "PruneEvents")
	if n != 1 {
		t.Fatalf("PruneEvents = %d, want 1 (old2; old1 is done)", n)
	}
	for _, id := range []string{"old1", "old2"} {
		if got := readAll(t, s, id); len(got) != 0 {
			t.Fatalf("%s keeps %d events after PruneEvents", id, len(got))
		}
		if n := lastSeq(t, s, id); n != 3 {
			t.Fatalf("%s LastSeq after PruneEvents = %d, want 3 (seqs are never reused)", id, n)
		}
		if sz, err := s.LogSize(ctx, id); err != nil || sz != 0 {
			t.Fatalf("%s LogSize after PruneEvents = %d, %v", id, sz, err)
		}
		if r, ok, err := s.GetRun(ctx, id); err != nil || !ok || r.Prompt != secretPrompt {
			t.Fatalf("%s record after PruneEvents = %s ok %v err %v: want it kept", id, fmtRun(r), ok, err)
		}
	}
	if got := readAll(t, s, "new"); len(got) != 3 {
		t.Fatalf("new run lost events: %d", len(got))
	}
	if got := readAll(t, s, "live"); len(got) != 2 {
		t.Fatalf("live run lost events: %d", len(got))
	}
	if n, err = s.PruneEvents(ctx, base.Add(time.Minute), 0); err != nil || n != 0 {
		t.Fatalf("PruneEvents again = %d, %v: want 0", n, err)
	}
}
