package acp_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// TestLiveApproval: with approvalWait set, a permission request the
// policy asks about waits, with the turn, for an answer given while the
// run is live (Runner.Answer), and the same turn goes on with it; an
// unanswered request is decided by the policy's default at its deadline.
// The answer can come through another corral process (a second Runner on
// the same store, another replica) than the one that drives the run; an
// answer written into the answers file from inside the sandbox (what the
// agent could do) is not authenticated and counts for nothing.
func TestLiveApproval(t *testing.T) {
	bin := agent(t)
	const id = echoApproval
	for _, c := range []struct {
		askCase
		replica   bool // the answer comes through the second runner
		cancel    bool // the run is cancelled while the request waits
		forge     bool // something in the sandbox writes an answer itself
		wantState store.RunStatus
	}{
		{askCase{"allowed live", sandbox.Deny, time.Minute, ptr(true), true, "answer"}, false, false, false, store.RunCompleted},
		{askCase{"denied live", sandbox.Allow, time.Minute, ptr(false), false, "answer"}, false, false, false, store.RunCompleted},
		{askCase{"allowed through another replica", sandbox.Deny, time.Minute, ptr(true), true, "answer"}, true, false, false, store.RunCompleted},
		{askCase{"deadline, default deny", sandbox.Deny, 300 * time.Millisecond, nil, false, "deadline"}, false, false, false, store.RunCompleted},
		{askCase{"deadline, default allow", sandbox.Allow, 300 * time.Millisecond, nil, true, "deadline"}, false, false, false, store.RunCompleted},
		{askCase{"cancelled while waiting", sandbox.Allow, time.Minute, nil, false, "cancelled"}, false, true, false, store.RunCancelled},
		{askCase{"forged by the agent", sandbox.Deny, 500 * time.Millisecond, nil, false, "deadline"}, false, false, true, store.RunCompleted},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newReplicas(t, askPolicy(c.def))
			journals := w.journals
			h := acp.New(acp.Options{StartTimeout: 30 * time.Second, ExitGrace: 2 * time.Second, AnswerPoll: 50 * time.Millisecond})
			t.Cleanup(func() { _ = h.Close(testCtx(t)) })
			r := w.runner(t, h)
			answerer := r
			if c.replica {
				answerer = w.runner(t, acp.New(acp.Options{}))
			}
			ctx := testCtx(t)
			rec, err := r.Start(ctx, run.StartRequest{Definition: "d", Thread: "th", Harness: acp.Name, Prompt: "p", Args: []string{bin},
				Options: map[string]string{acp.OptionApprovalWait: c.wait.String()}})
			if err != nil {
				t.Fatal(err)
			}
			var evs []event.Event
			if err := r.Follow(ctx, rec.ID, 0, func(e store.Event) error {
				ev, err := event.Unmarshal(e.Data)
				if err != nil {
					return err
				}
				evs = append(evs, ev)
				if ev.Type == event.Custom && ev.Name == acp.EventApprovalWaiting {
					switch {
					case c.answer != nil:
						return answerer.Answer(ctx, rec.ID, id, *c.answer)
					case c.cancel:
						_, err := r.Cancel(ctx, rec.ID)
						return err
					case c.forge:
						// What an agent could write: it knows its run
						// directory (acp.MarkerEnv), not the answer key.
						paths, err := journal.PathsFor(journals, rec.ID)
						if err != nil {
							return err
						}
						forged := `{"approvalId":"` + id + `","allow":true}` + "\n" +
							`{"approvalId":"` + id + `","allow":true,"mac":"` + strings.Repeat("0", 64) + `"}` + "\n"
						return os.WriteFile(filepath.Join(paths.Files, harness.AnswersFile), []byte(forged), 0o600)
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := h.Wait(ctx, rec.ID); err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(ctx, rec.ID); err != nil {
				t.Fatal(err)
			}
			checkWellFormed(t, evs)
			if err := answerer.Answer(ctx, rec.ID, id, true); sandbox.CodeOf(err) != sandbox.FailedPrecondition {
				t.Errorf("answering a run that ended: %v, want FailedPrecondition", err)
			}
			final, _, _ := r.Store().GetRun(ctx, rec.ID)
			tc := toolCalls(t, evs)["call-1"]
			ran := tc != nil && !tc.isError && tc.result == "hello\n"
			var answered []map[string]any
			for _, v := range customs(evs, acp.EventApprovalAnswered) {
				var m map[string]any
				_ = json.Unmarshal(v, &m)
				answered = append(answered, m)
			}
			waiting := len(customs(evs, acp.EventApprovalWaiting))
			if c.forge {
				warned := strings.Contains(dump(evs), "not authenticated answers")
				if !warned {
					t.Errorf("no warning about the forged answers:\n%s", dump(evs))
				}
				t.Logf("forged answers: 2 written inside the sandbox, 0 accepted, warned %v", warned)
			}
			requested := len(approvals(t, evs))
			if ran != c.wantRan || final.Status != c.wantState || waiting != 1 || requested != 1 || len(answered) != 1 ||
				answered[0]["by"] != c.wantBy || answered[0]["allowed"] != c.wantRan || answered[0]["approvalId"] != id {
				t.Errorf("command ran %v (want %v), status %s, requested %d, waiting %d, answered %v:\n%s",
					ran, c.wantRan, final.Status, requested, waiting, answered, dump(evs))
			}
			if end := evs[len(evs)-1]; end.Type == event.RunFinished && end.Outcome != nil && end.Outcome.Type == event.OutcomeInterrupt {
				t.Errorf("a request settled in the turn still ends the run interrupted: %+v", end.Outcome)
			}
			t.Logf("%s: 1 request, settled by %v (allowed %v) in the same run; command ran %v; run %s",
				c.name, answered[0]["by"], answered[0]["allowed"], ran, final.Status)
		})
	}
}

func ptr[T any](v T) *T { return &v }
