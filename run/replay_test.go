package run_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
)

// gatedAgent prints 1..5, waits for the file "go" in its workspace, then
// prints 6..10.
const gatedAgent = `for i in 1 2 3 4 5; do echo $i; done; while [ ! -e go ]; do sleep 0.05; done; for i in 6 7 8 9 10; do echo $i; done`

func (e *env) handle(t *testing.T, r *run.Runner, c context.Context, rec store.Run) sandbox.Handle {
	t.Helper()
	res, ok, err := r.Ensure().EnsureExisting(c, e.def, ensure.Request{Thread: rec.ThreadID, Run: rec.ID, Tenant: rec.Tenant})
	if err != nil || !ok {
		t.Fatalf("the run's sandbox: %v %v", ok, err)
	}
	return res.Handle
}

// killOnCleanup kills what the run left running when the test ends (a
// failed test must not leave an agent waiting for its gate).
func (e *env) killOnCleanup(t *testing.T, r *run.Runner, rec store.Run, journalDir string) {
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, ok, err := r.Ensure().EnsureExisting(c, e.def, ensure.Request{Thread: rec.ThreadID, Run: rec.ID, Tenant: rec.Tenant})
		if err != nil || !ok {
			return
		}
		if p, err := journal.PathsFor(journalDir, rec.ID); err == nil {
			_ = journal.Kill(c, res.Handle, p, time.Second)
			_ = journal.Remove(c, res.Handle, p)
		}
	})
}

// waitSeq follows the run until its log holds n events.
func waitSeq(t *testing.T, r *run.Runner, c context.Context, id string, n int64) {
	t.Helper()
	fctx, stop := context.WithCancel(c)
	defer stop()
	_ = r.Follow(fctx, id, 0, func(ev store.Event) error {
		if ev.Seq >= n {
			stop()
		}
		return nil
	})
	if c.Err() != nil {
		t.Fatalf("the log never held %d events", n)
	}
}

// TestDivergedReplayEndsRun tampers with a detached run's stored log (an
// event the journal will never produce) and checks that attach, cancel and
// the reaper each end the run — failed, with a RUN_ERROR "replay-diverged"
// after the stored events and the log closed — instead of retrying the
// takeover for ever.
func TestDivergedReplayEndsRun(t *testing.T) {
	for _, via := range []string{"attach", "cancel", "reaper"} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t)
			a, b := e.runner(t, run.Options{}), e.runner(t, run.Options{})
			c, cancel := context.WithTimeout(ctx(t), time.Minute) // hang guard
			defer cancel()
			rec, err := a.Start(c, run.StartRequest{Definition: "d", Thread: "t", Harness: command.Name, Args: []string{"sh", "-c", gatedAgent}})
			if err != nil {
				t.Fatal(err)
			}
			e.killOnCleanup(t, b, rec, "")
			waitSeq(t, a, c, rec.ID, 7) // RUN_STARTED, TEXT_MESSAGE_START, 1..5
			if err := a.Detach(c, rec.ID); err != nil {
				t.Fatal(err)
			}
			// Another writer's event where the journal has line 6.
			cur, _, _ := e.st.GetRun(c, rec.ID)
			claimed, err := e.st.ClaimRun(c, rec.ID, cur.DriverEpoch)
			if err != nil {
				t.Fatal(err)
			}
			last, _ := e.st.LastSeq(c, rec.ID)
			bogus := event.Event{Type: event.TextMessageContent, MessageID: rec.ID + "-msg-1", Delta: "not from the journal\n"}
			if err := e.st.AppendEvents(c, rec.ID, claimed.DriverEpoch, last+1, []store.NewEvent{{Type: string(bogus.Type), Data: bogus.Marshal()}}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.handle(t, b, c, rec).Exec(c, sandbox.Command{Args: []string{"touch", "go"}}); err != nil {
				t.Fatal(err)
			}
			switch via {
			case "attach":
				if err := b.Attach(c, rec.ID, 0, func(store.Event) error { return nil }); err != nil {
					t.Fatalf("attach: %v", err)
				}
			case "cancel":
				if _, err := b.Cancel(c, rec.ID); err != nil {
					t.Fatal(err)
				}
				if err := b.Follow(c, rec.ID, 0, func(store.Event) error { return nil }); err != nil {
					t.Fatalf("follow after cancel: %v", err)
				}
			case "reaper":
				waitExit(t, c, e.handle(t, b, c, rec), rec) // a producing run is left alone
				rep, err := b.Reap(c, run.ReapOptions{TTL: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("reaper: %+v", rep.Runs)
			}
			_ = b.Wait(c, rec.ID)
			got, _, _ := e.st.GetRun(c, rec.ID)
			closed, _ := e.st.LogClosed(c, rec.ID)
			_, all := storedEvents(t, e.st, c, rec.ID)
			lastEv := all[len(all)-1]
			if got.Status != store.RunFailed || !closed || lastEv.Type != event.RunError || lastEv.Code != "replay-diverged" ||
				!strings.Contains(lastEv.Message, "at event 8: stored TEXT_MESSAGE_CONTENT, replayed TEXT_MESSAGE_CONTENT") {
				t.Fatalf("record %s %q, log closed %v, last event %+v", got.Status, got.Error, closed, lastEv)
			}
			if len(all) != int(last)+2 {
				t.Errorf("%d events, want the %d stored, the bogus one and the RUN_ERROR", len(all), last)
			}
			t.Logf("via %s: ended %s in %d events: %s", via, got.Status, len(all), lastEv.Message)
		})
	}
}

// waitExit waits until the run's journal records the agent's exit.
func waitExit(t *testing.T, c context.Context, h sandbox.Handle, rec store.Run) {
	t.Helper()
	p, _ := journal.PathsFor("", rec.ID)
	for {
		st, err := journal.Probe(c, h, p, rec.JournalNonce)
		if err != nil {
			t.Fatal(err)
		}
		if st.Finished {
			return
		}
		select {
		case <-c.Done():
			t.Fatal("the agent never finished")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// storedEvents reads the log, checking its sequence numbers are dense.
func storedEvents(t *testing.T, st store.Store, c context.Context, id string) ([]store.Event, []event.Event) {
	t.Helper()
	raw, err := st.ReadEvents(c, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Event
	for i, e := range raw {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i+1, e.Seq)
		}
		ev, err := event.Unmarshal(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return raw, out
}

// TestReplayAfterJournalReadFailure takes over a run whose journal lost
// its tail (cut after line 10 of 20) and whose wrapper was killed with
// SIGKILL, so the replay's read fails (no exit line) before it reached the
// stored events' end. The RUN_ERROR of the failure must go after the
// stored events and end the run; it used to be compared with stored event
// 13 and the takeover retried for ever.
func TestReplayAfterJournalReadFailure(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	a, b := e.runner(t, run.Options{JournalDir: dir}), e.runner(t, run.Options{JournalDir: dir})
	c, cancel := context.WithTimeout(ctx(t), time.Minute)
	defer cancel()
	rec, err := a.Start(c, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"sh", "-c", "seq 1 20; sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	e.killOnCleanup(t, b, rec, dir)
	waitSeq(t, a, c, rec.ID, 22)
	if err := a.Detach(c, rec.ID); err != nil {
		t.Fatal(err)
	}
	p, _ := journal.PathsFor(dir, rec.ID)
	data, err := os.ReadFile(p.Journal)
	if err != nil {
		t.Fatal(err)
	}
	start, _, _ := bytes.Cut(data, []byte("\n"))
	digits, _ := strings.CutPrefix(string(start), `{"__start":`)
	if i := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		digits = digits[:i]
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 1 {
		t.Fatalf("start line %q", start)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL) // the wrapper's group: no exit line
	_ = syscall.Kill(pid, syscall.SIGKILL)
	cut := bytes.Index(data, []byte("\n11\n")) + 1
	if err := os.WriteFile(p.Journal, data[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Attach(c, rec.ID, 0, func(store.Event) error { return nil }); err != nil {
		t.Fatalf("attach: %v", err)
	}
	_ = b.Wait(c, rec.ID)
	got, _, _ := e.st.GetRun(c, rec.ID)
	_, all := storedEvents(t, e.st, c, rec.ID)
	last := all[len(all)-1]
	if got.Status != store.RunFailed || last.Type != event.RunError || last.Code != "journal" || len(all) != 23 {
		t.Fatalf("record %s %q; %d events, last %+v", got.Status, got.Error, len(all), last)
	}
	if strings.Join(lines(all), ",") != strings.Join(seq(20), ",") {
		t.Errorf("the log's lines %v", lines(all))
	}
	t.Logf("ended %s after 22 stored events + %s %q", got.Status, last.Code, last.Message)
}

// hugeLine is one line of n x's.
func hugeLine(n int) string { return fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; echo", n) }

// TestHugeLineTakeover detaches a run mid-way through a 40 MB line and
// attaches from another runner, with each journal strategy, with lines
// whole and with the line in pieces cut differently by the two drivers:
// the run completes and the log holds every byte once.
func TestHugeLineTakeover(t *testing.T) {
	const n = 40_000_000
	for _, tc := range []struct {
		strategy journal.Strategy
		pieceA   int
		pieceB   int
	}{
		{journal.Follow, 0, 0}, {journal.Poll, 0, 0}, {journal.Follow, 1 << 20, 3 << 20}, {journal.Poll, 3 << 20, 1 << 20},
	} {
		t.Run(fmt.Sprintf("%s pieces %d then %d", tc.strategy, tc.pieceA, tc.pieceB), func(t *testing.T) {
			prev := run.SetPieceSize(tc.pieceA)
			t.Cleanup(func() { run.SetPieceSize(prev) })
			e := newEnv(t)
			opts := run.Options{Strategy: tc.strategy}
			a, b := e.runner(t, opts), e.runner(t, opts)
			c, cancel := context.WithTimeout(ctx(t), 90*time.Second)
			defer cancel()
			rec, err := a.Start(c, run.StartRequest{Definition: "d", Harness: command.Name,
				Args: []string{"sh", "-c", "echo first; " + hugeLine(n) + "; echo last"}})
			if err != nil {
				t.Fatal(err)
			}
			want := int64(4) // RUN_STARTED, TEXT_MESSAGE_START, "first", a piece of the line
			if tc.pieceA == 0 {
				want = 3
			}
			waitSeq(t, a, c, rec.ID, want)
			if err := a.Detach(c, rec.ID); err != nil {
				t.Fatal(err)
			}
			before, _ := e.st.LastSeq(c, rec.ID)
			run.SetPieceSize(tc.pieceB)
			if err := b.Attach(c, rec.ID, 0, func(store.Event) error { return nil }); err != nil {
				t.Fatalf("attach: %v", err)
			}
			_ = b.Wait(c, rec.ID)
			got, _, _ := e.st.GetRun(c, rec.ID)
			_, all := storedEvents(t, e.st, c, rec.ID)
			var text strings.Builder
			for _, ev := range all {
				text.WriteString(ev.Delta)
			}
			wantText := "first\n" + strings.Repeat("x", n) + "\nlast\n"
			if got.Status != store.RunCompleted || text.String() != wantText {
				t.Fatalf("record %s %q; text %d bytes (want %d, equal %v); last event %+v", got.Status, got.Error, text.Len(), len(wantText), text.String() == wantText, all[len(all)-1])
			}
			t.Logf("%d events (%d before the detach), %d bytes of text, every one once", len(all), before, text.Len())
		})
	}
}
