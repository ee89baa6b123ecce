package acp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

var errSeen = errors.New("seen")

// TestTakeOverPendingPermission: the corral process that drives an ACP run
// dies while the agent's permission request waits for a live answer (its
// client vanishes without a word, its driver is gone). A second process on
// the same store takes the run over: its client re-attaches to the agent,
// which the relay kept, and goes on with the same turn. The request is
// answered through a third replica (or by its deadline, which still
// counts from when the request was made), the agent runs the command the
// answer allows exactly once, and the run ends with the prompt's stop
// reason; every event is in the log once.
func TestTakeOverPendingPermission(t *testing.T) {
	bin := agent(t)
	const id = echoApproval
	for _, c := range []askCase{
		{"allowed through another replica", sandbox.Deny, time.Minute, ptr(true), true, "answer"},
		{"denied through another replica", sandbox.Allow, time.Minute, ptr(false), false, "answer"},
		{"deadline after the takeover, default allow", sandbox.Allow, 3 * time.Second, nil, true, "deadline"},
		{"deadline after the takeover, default deny", sandbox.Deny, 3 * time.Second, nil, false, "deadline"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newReplicas(t, askPolicy(c.def))
			newH := func() *acp.Harness {
				h := acp.New(acp.Options{StartTimeout: 30 * time.Second, ExitGrace: 2 * time.Second, AnswerPoll: 50 * time.Millisecond, ReattachWait: time.Minute})
				t.Cleanup(func() { _ = h.Close(testCtx(t)) })
				return h
			}
			first, second := newH(), newH()
			r1, r2, answerer := w.runner(t, first), w.runner(t, second), w.runner(t, acp.New(acp.Options{}))
			ctx := testCtx(t)
			rec, err := r1.Start(ctx, run.StartRequest{Definition: "d", Thread: "th", Harness: acp.Name, Prompt: "p", Args: []string{bin},
				Options: map[string]string{acp.OptionApprovalWait: c.wait.String()}})
			if err != nil {
				t.Fatal(err)
			}
			waitingAt := time.Now()
			if err := r1.Follow(ctx, rec.ID, 0, func(e store.Event) error {
				if ev, err := event.Unmarshal(e.Data); err == nil && ev.Type == event.Custom && ev.Name == acp.EventApprovalWaiting {
					return errSeen
				}
				return nil
			}); !errors.Is(err, errSeen) {
				t.Fatalf("the request never waited: %v", err)
			}
			// The first process dies: its client vanishes, its driver stops.
			if !first.Abandon(rec.ID) {
				t.Fatal("the first process held no session")
			}
			if err := r1.Close(ctx); err != nil {
				t.Fatal(err)
			}
			var evs []event.Event
			answered := false
			if err := r2.Attach(ctx, rec.ID, 0, func(e store.Event) error {
				ev, err := event.Unmarshal(e.Data)
				if err != nil {
					return err
				}
				evs = append(evs, ev)
				if ev.Type == event.Custom && ev.Name == acp.EventApprovalWaiting && c.answer != nil && !answered {
					answered = true
					return answerer.Answer(ctx, rec.ID, id, *c.answer)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			settled := time.Since(waitingAt)
			if err := second.Wait(ctx, rec.ID); err != nil {
				t.Fatal(err)
			}
			checkWellFormed(t, evs)
			final, _, _ := r2.Store().GetRun(ctx, rec.ID)
			tc := toolCalls(t, evs)["call-1"]
			ran := tc != nil && !tc.isError && tc.result == "hello\n"
			var answers []map[string]any
			for _, v := range customs(evs, acp.EventApprovalAnswered) {
				var m map[string]any
				_ = json.Unmarshal(v, &m)
				answers = append(answers, m)
			}
			seen := map[string]int{}
			for _, e := range evs {
				b, _ := json.Marshal(e)
				seen[string(b)]++
			}
			for k, n := range seen {
				if n > 1 {
					t.Errorf("event %d times: %s", n, k)
				}
			}
			text := text(evs, event.TextMessageContent)
			if ran != c.wantRan || final.Status != store.RunCompleted || last(evs).Type != event.RunFinished ||
				len(customs(evs, acp.EventApprovalWaiting)) != 1 || len(approvals(t, evs)) != 1 ||
				len(answers) != 1 || answers[0]["by"] != c.wantBy || answers[0]["allowed"] != c.wantRan ||
				strings.Count(text, "Working on: p") != 1 || !strings.HasSuffix(text, "Done.") {
				t.Errorf("command ran %v (want %v), status %s, answered %v, text %q:\n%s", ran, c.wantRan, final.Status, answers, text, dump(evs))
			}
			if c.answer == nil && settled < c.wait {
				t.Errorf("the deadline (%s from the request) decided after %s", c.wait, settled)
			}
			t.Logf("%s: taken over by a second process, settled by %v (allowed %v) in the same turn; command ran %v; run %s; %d events, none twice",
				c.name, answers[0]["by"], answers[0]["allowed"], ran, final.Status, len(evs))
		})
	}
}

// TestTakeOverAgentGone: when the agent exits while no client holds its
// session, the run taken over ends as today, with acp-session-lost.
func TestTakeOverAgentGone(t *testing.T) {
	bin := agent(t)
	w := newReplicas(t, &sandbox.Policy{Default: sandbox.Allow})
	journals := w.journals
	first := acp.New(acp.Options{StartTimeout: 30 * time.Second, ReattachWait: time.Minute})
	second := acp.New(acp.Options{})
	t.Cleanup(func() { _ = first.Close(testCtx(t)); _ = second.Close(testCtx(t)) })
	r1, r2 := w.runner(t, first), w.runner(t, second)
	ctx := testCtx(t)
	rec, err := r1.Start(ctx, run.StartRequest{Definition: "d", Thread: "th", Harness: acp.Name, Prompt: "p", Args: []string{bin, "-hang"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Follow(ctx, rec.ID, 0, func(e store.Event) error {
		if ev, err := event.Unmarshal(e.Data); err == nil && ev.Type == event.TextMessageContent {
			return errSeen
		}
		return nil
	}); !errors.Is(err, errSeen) {
		t.Fatalf("the turn never started: %v", err)
	}
	if !first.Abandon(rec.ID) {
		t.Fatal("no session")
	}
	if err := r1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The agent dies while orphaned.
	paths, err := journal.PathsFor(journals, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, ctx, "the relay keeps the orphaned agent", 20*time.Millisecond, func(context.Context) (bool, error) {
		_, err := os.Stat(filepath.Join(paths.Files, "orphan"))
		return err == nil, nil
	})
	b, err := os.ReadFile(filepath.Join(paths.Files, "agent.pgid"))
	if err != nil {
		t.Fatal(err)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pgid <= 1 {
		t.Fatalf("agent.pgid %q", b)
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var got []event.Event
	if err := r2.Attach(ctx, rec.ID, 0, func(e store.Event) error {
		ev, err := event.Unmarshal(e.Data)
		if err == nil {
			got = append(got, ev)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if e := last(got); e.Type != event.RunError || e.Code != acp.CodeSessionLost {
		t.Fatalf("got %s", dump(got))
	}
}
