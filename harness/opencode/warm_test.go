package opencode_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/opencode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
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
			files, _ := filepath.Glob(filepath.Join(f.journals, opencode.WarmDirPrefix+"*", "*"))
			for _, name := range files {
				if filepath.Base(name) == "password" {
					continue
				}
				if b, err := os.ReadFile(name); err == nil {
					t.Logf("%s:\n%.3000s", name, b)
				}
			}
		}
		if pid := f.serverPid(); pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
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
	o := map[string]string{}
	for k, v := range f.opts {
		o[k] = v
	}
	for k, v := range warmMode {
		o[k] = v
	}
	for i := 0; i+1 < len(more); i += 2 {
		o[more[i]] = more[i+1]
	}
	rec, err := f.r.Start(ctx, run.StartRequest{Definition: "d", Thread: "th", Harness: opencode.Name, Prompt: prompt, Model: fakemodel.ModelID, Options: o, Env: f.env})
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
	if s2.last.Type != event.RunFinished || s2.text != "two" || s2.session != s.session || f.serverPid() != pid || syscall.Kill(pid, 0) != nil {
		t.Fatalf("second turn: last %s %s, text %q, session %q (first %q), server %d (first %d)", s2.last.Type, s2.last.Message, s2.text, s2.session, s.session, f.serverPid(), pid)
	}

	// The server dies between turns: the next turn starts a new one that
	// resumes the session.
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
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
	fctx, stop := context.WithCancel(ctx)
	_ = f.r.Follow(fctx, rec.ID, 0, func(e store.Event) error {
		if ev, err := event.Unmarshal(e.Data); err == nil && ev.Type == event.TextMessageContent {
			stop()
		}
		return nil
	})
	stop()
	pid := f.serverPid()
	if pid == 0 || len(testutil.SessionProcs(pid)) == 0 {
		t.Fatalf("no live server mid-turn (pid %d)", pid)
	}
	if _, err := f.r.Cancel(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	_ = f.r.Wait(ctx, rec.ID)
	final, _, err := f.r.Store().GetRun(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != store.RunCancelled {
		t.Errorf("status %s, want cancelled", final.Status)
	}
	// The kill is delivered at once, the exit takes a moment: WaitFor's
	// bound is a hang guard, not a timing verdict.
	testutil.WaitFor(t, ctx, "the server's session to be gone after the cancel", 50*time.Millisecond,
		func(context.Context) (bool, error) { return len(testutil.SessionProcs(pid)) == 0, nil })
}

// TestRealOpenCodeWarmLiveApproval: live approvals work on a warm turn.
// The thread's second turn runs on the first turn's server; the command
// the policy asks about waits in that turn's client for an answer given
// while the run is live, and, allowed, runs in the same turn.
func TestRealOpenCodeWarmLiveApproval(t *testing.T) {
	const cmd = "echo hello > made.txt"
	policy := &sandbox.Policy{Default: sandbox.Deny, Commands: sandbox.CommandRules{Ask: []string{"echo *"}}}
	f := newWarmFixture(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Command: cmd}, {Text: "finished"}}}, policy)
	ctx := testCtx(t)
	live := []string{opencode.OptApprovalWait, "1m", opencode.OptAnswerPoll, "50ms"}
	first := f.startTurn(t, ctx, "First?", live...)
	if err := f.r.Wait(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	pid := f.serverPid()
	rec := f.startTurn(t, ctx, "Make the file.", live...)
	var evs []event.Event
	var answered []event.ApprovalAnswer
	if err := f.r.Follow(ctx, rec.ID, 0, func(e store.Event) error {
		ev, err := event.Unmarshal(e.Data)
		if err != nil {
			return err
		}
		evs = append(evs, ev)
		switch {
		case ev.Type == event.Custom && ev.Name == event.ApprovalWaiting:
			var w struct{ ApprovalID string }
			_ = json.Unmarshal(ev.Value, &w)
			return f.r.Answer(ctx, rec.ID, w.ApprovalID, true)
		case ev.Type == event.Custom && ev.Name == event.ApprovalAnswered:
			var a event.ApprovalAnswer
			_ = json.Unmarshal(ev.Value, &a)
			answered = append(answered, a)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s := summarize(t, evs)
	if pid == 0 || f.serverPid() != pid {
		t.Errorf("the second turn ran on server %d, the first on %d: not warm", f.serverPid(), pid)
	}
	if len(answered) != 1 || !answered[0].Allowed || answered[0].By != "answer" || len(s.files) != 1 || s.files[0] != "made.txt" || s.text != "finished" || s.last.Type != event.RunFinished {
		t.Errorf("answered %+v, files %q, text %q, last %s %s", answered, s.files, s.text, s.last.Type, s.last.Message)
	}
}
