package opencode_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/opencode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/internal/turntest"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// warmMode is server mode with a kept server.
var warmMode = map[string]string{opencode.OptMode: opencode.ModeServer, opencode.OptWarm: "true"}

// newWarmFixture is newFixture whose kept servers die with the test (and
// whose keeper directories are logged when it fails).
func newWarmFixture(t testing.TB, script fakemodel.Script, policy *sandbox.Policy) *fixture {
	t.Helper()
	f := newWorkspaceFixture(t, script, policy, nil, nil)
	t.Cleanup(func() {
		if t.Failed() {
			testutil.LogFiles(t, func(name string) bool { return filepath.Base(name) == "password" },
				filepath.Join(f.journals, opencode.WarmDirPrefix+"*", "*"))
		}
		if pid := f.serverPid(); pid > 0 {
			_ = testutil.KillGroup(pid)
		}
	})
	return f
}

// serverPid is the pid the thread's keeper directory records (0: none).
func (f *fixture) serverPid() int {
	return testutil.PidFile(filepath.Join(f.journals, opencode.WarmDirPrefix+"*", "pid"))
}

// startTurn starts a warm turn of thread "th", with more options.
func (f *fixture) startTurn(t testing.TB, ctx context.Context, prompt string, more ...string) store.Run {
	t.Helper()
	pairs := map[string]string{}
	for i := 0; i+1 < len(more); i += 2 {
		pairs[more[i]] = more[i+1]
	}
	rec, err := f.r.Start(ctx, run.StartRequest{Definition: "d", Thread: "th", Harness: opencode.Name, Prompt: prompt, Model: fakemodel.ModelID, Options: f.options(warmMode, pairs), Env: f.env})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestRealOpenCodeWarm: with warm=true the thread's second turn is served
// by the server of its first (same pid), with the right answer in the same
// session; a server SIGKILLed between turns is replaced on the next turn,
// which resumes the session with the right answer.
func TestRealOpenCodeWarm(t *testing.T) {
	f := newWarmFixture(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Text: "two"}, {Text: "three"}}}, nil)
	ctx := testCtx(t)
	s := summarize(t, f.run(t, ctx, "th", "First?", warmMode))
	pid := f.serverPid()
	if s.last.Type != event.RunFinished || s.text != "one" || s.session == "" || pid == 0 {
		t.Fatalf("first turn: last %s %s, text %q, session %q, server %d", s.last.Type, s.last.Message, s.text, s.session, pid)
	}
	s2 := summarize(t, f.run(t, ctx, "th", "Second?", warmMode))
	if s2.last.Type != event.RunFinished || s2.text != "two" || s2.session != s.session || f.serverPid() != pid || len(testutil.SessionProcs(pid)) == 0 {
		t.Fatalf("second turn: last %s %s, text %q, session %q (first %q), server %d (first %d)", s2.last.Type, s2.last.Message, s2.text, s2.session, s.session, f.serverPid(), pid)
	}

	// The server dies between turns: the next turn starts a new one that
	// resumes the session.
	if err := testutil.KillGroup(pid); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, ctx, "the killed server's session to be gone", 20*time.Millisecond,
		func(context.Context) (bool, error) { return len(testutil.SessionProcs(pid)) == 0, nil })
	s3 := summarize(t, f.run(t, ctx, "th", "Third?", warmMode))
	pid3 := f.serverPid()
	if s3.last.Type != event.RunFinished || s3.text != "three" || s3.session != s.session || pid3 == pid || pid3 == 0 {
		t.Fatalf("after the kill: last %s %s, text %q, session %q (first %q), server %d (killed %d)", s3.last.Type, s3.last.Message, s3.text, s3.session, s.session, pid3, pid)
	}
	reqs := f.srv.ModelRequests()
	if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "First?") || !strings.Contains(body, "Second?") {
		t.Error("the third turn's model request does not carry the earlier conversation")
	}
	t.Logf("turns 1-2 on server %d; killed; turn 3 on server %d, session %s resumed", pid, pid3, s.session)
}

// TestRealOpenCodeWarmCancel: cancelling a warm turn mid-answer ends the
// run cancelled and leaves no process of the kept server's session.
func TestRealOpenCodeWarmCancel(t *testing.T) {
	f := newWarmFixture(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: strings.Repeat("slow words ", 400)}}, Delay: 20 * time.Millisecond, ChunkSize: 4}, nil)
	ctx := testCtx(t)
	rec := f.startTurn(t, ctx, "Talk.")
	turntest.UntilText(ctx, f.r, rec.ID)
	pid := f.serverPid()
	if pid == 0 || len(testutil.SessionProcs(pid)) == 0 {
		t.Fatalf("no live server mid-turn (pid %d)", pid)
	}
	turntest.CancelLeavesNothing(t, ctx, f.r, rec.ID, pid)
}

// TestRealOpenCodeWarmTakeover: a warm turn whose driving runner goes away
// mid-answer is taken over by another runner on the same store (another
// host) and delivered once: every stored event delivered in order, one
// RUN_FINISHED, the whole answer, the kept server unchanged.
func TestRealOpenCodeWarmTakeover(t *testing.T) {
	answer := strings.Repeat("word ", 200)
	f := newWarmFixture(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Text: answer}}, Delay: 10 * time.Millisecond, ChunkSize: 8}, nil)
	ctx := testCtx(t)
	if err := f.r.Wait(ctx, f.startTurn(t, ctx, "First?").ID); err != nil {
		t.Fatal(err)
	}
	pid := f.serverPid()
	rec := f.startTurn(t, ctx, "Second?")
	turntest.UntilText(ctx, f.r, rec.ID)
	if err := f.r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	other := f.runner(t)
	var delivered []store.Event
	if err := other.Attach(ctx, rec.ID, 0, func(e store.Event) error { delivered = append(delivered, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := other.Wait(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	st := other.Store()
	stored, err := st.ReadEvents(ctx, rec.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var evs []event.Event
	for i, e := range stored {
		if e.Seq != int64(i+1) || i >= len(delivered) || delivered[i].Seq != e.Seq {
			t.Fatalf("stored event %d has seq %d; %d delivered", i+1, e.Seq, len(delivered))
		}
		ev, _ := event.Unmarshal(e.Data)
		evs = append(evs, ev)
	}
	s := summarize(t, evs)
	final, _, _ := st.GetRun(ctx, rec.ID)
	finished := 0
	for _, e := range evs {
		if e.Type == event.RunFinished {
			finished++
		}
	}
	if final.Status != store.RunCompleted || final.DriverEpoch < 2 || len(delivered) != len(stored) || finished != 1 || s.text != answer || f.serverPid() != pid {
		t.Errorf("status %s epoch %d, delivered %d of %d, %d RUN_FINISHED, text %d bytes (want %d), server %d (was %d)",
			final.Status, final.DriverEpoch, len(delivered), len(stored), finished, len(s.text), len(answer), f.serverPid(), pid)
	}
}
