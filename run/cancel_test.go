package run_test

import (
	"context"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// waitRunning follows the run until its first text.
func waitRunning(t *testing.T, c context.Context, r *run.Runner, id string) {
	t.Helper()
	fctx, stop := context.WithCancel(c)
	defer stop()
	_ = r.Follow(fctx, id, 0, func(ev store.Event) error {
		if ev.Type == string(event.TextMessageContent) {
			stop()
		}
		return nil
	})
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
}

// TestCancelInProcessNeedsNoPoll: a cancel asked through the Runner that
// drives the run reaches its driver at once; the store is not polled for
// it (the poll here would come after an hour).
func TestCancelInProcessNeedsNoPoll(t *testing.T) {
	e := newEnv(t)
	st := &readCounter{Store: e.st}
	r, err := run.New(st, []*sandbox.Definition{e.def}, []harness.Harness{command.Harness{}}, run.Options{CancelCheck: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	c := ctx(t)
	rec, err := r.Start(c, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"sh", "-c", "echo started; sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, r, rec.ID)
	before := st.getRuns.Load()
	if _, err := r.Cancel(c, rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(c, rec.ID); err != nil {
		t.Fatal(err)
	}
	got, _, _ := e.st.GetRun(c, rec.ID)
	if got.Status != store.RunCancelled {
		t.Errorf("status %s, want cancelled", got.Status)
	}
	// Cancel reads the record once; the driver reads it for no cancel.
	if n := st.getRuns.Load() - before; n != 1 {
		t.Errorf("%d GetRun calls from the cancel to the run's end, want 1 (Cancel's own)", n)
	}
}

// TestCancelThroughAnotherRunner: a cancel asked through a Runner that
// does not drive the run (another host's) is stored, and the live driver
// finds it by its poll of the record; a takeover after a cancel acts on
// the claimed record's request at once (its poll here would come after an
// hour).
func TestCancelThroughAnotherRunner(t *testing.T) {
	for _, tc := range []struct {
		name     string
		takeover bool
	}{{"live driver polls", false}, {"takeover after the cancel", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			check := 50 * time.Millisecond
			if tc.takeover {
				check = time.Hour
			}
			mk := func() *run.Runner {
				r, err := run.New(e.st, []*sandbox.Definition{e.def}, []harness.Harness{command.Harness{}}, run.Options{CancelCheck: check, LeaseTTL: 2 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = r.Close(context.Background()) })
				return r
			}
			a, b := mk(), mk()
			c := ctx(t)
			rec, err := a.Start(c, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"sh", "-c", "echo started; sleep 600"}})
			if err != nil {
				t.Fatal(err)
			}
			waitRunning(t, c, a, rec.ID)
			if tc.takeover {
				if err := a.Detach(c, rec.ID); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := b.Cancel(c, rec.ID); err != nil {
				t.Fatal(err)
			}
			if err := b.Follow(c, rec.ID, 0, func(store.Event) error { return nil }); err != nil {
				t.Fatalf("follow: %v", err)
			}
			_ = a.Wait(c, rec.ID)
			_ = b.Wait(c, rec.ID)
			if got, _, _ := e.st.GetRun(c, rec.ID); got.Status != store.RunCancelled {
				t.Errorf("status %s, want cancelled", got.Status)
			}
		})
	}
}
