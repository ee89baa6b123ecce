package acp_test

import (
	"testing"

	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// TestApprovalAnsweredThroughTheRunner: a policy that asks before `echo *`.
// The thread's first run asks (the permission request is rejected,
// approval.requested); its next run carries the answer, as `corral run
// --thread T --approve ID` (or --deny) gives it, and the agent's command
// runs (its output is the tool result) or is rejected without a second
// request.
func TestApprovalAnsweredThroughTheRunner(t *testing.T) {
	bin := agent(t)
	h := newHarness(t)
	r := newRunner(t, h, &sandbox.Policy{Commands: sandbox.CommandRules{Ask: []string{"echo *"}}, Default: sandbox.Allow})
	ctx := testCtx(t)
	const id = "acp:command:echo hello"
	start := func(thread string, answers map[string]bool) (asked int, tc *toolCall, status store.RunStatus) {
		t.Helper()
		rec, err := r.Start(ctx, run.StartRequest{Definition: "d", Thread: thread, Harness: acp.Name, Prompt: "p", Args: []string{bin, "-load"}, Approvals: answers})
		if err != nil {
			t.Fatal(err)
		}
		evs := follow(t, ctx, r, rec.ID)
		checkWellFormed(t, evs)
		if err := h.Wait(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		final, _, _ := r.Store().GetRun(ctx, rec.ID)
		for _, a := range approvals(t, evs) {
			if a.ID != id {
				t.Errorf("unexpected approval %+v", a)
			}
			asked++
		}
		return asked, toolCalls(t, evs)["call-1"], final.Status
	}
	for _, c := range []struct {
		name  string
		allow bool
	}{{"approve", true}, {"deny", false}} {
		t.Run(c.name, func(t *testing.T) {
			thread := "t-" + c.name
			asked, tc, _ := start(thread, nil)
			if asked != 1 || tc == nil || !tc.isError {
				t.Fatalf("first run: %d approvals, call %+v; want one request and a rejected call", asked, tc)
			}
			asked2, tc2, status := start(thread, map[string]bool{id: c.allow})
			ran := tc2 != nil && !tc2.isError && tc2.result == "hello\n"
			if asked2 != 0 || ran != c.allow || status != store.RunCompleted {
				t.Errorf("answered run (%s): %d approvals, call %+v, status %s", c.name, asked2, tc2, status)
			}
			t.Logf("acp --%s %s: first run asked %d, answered run asked %d, command ran %v (call %+v)", c.name, id, asked, asked2, ran, tc2)
		})
	}
}
