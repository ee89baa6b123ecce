package opencode_test

import (
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/opencode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/sandbox"
)

// TestRealOpenCodeApprovalAnswered: a policy that asks before `touch *`.
// The thread's first run asks (approval.requested, the command not run);
// its next run carries the answer, as `corral run --thread T --approve ID`
// (or --deny) gives it, and the resumed session's retry of the command is
// allowed (the file is made) or refused without a second request.
func TestRealOpenCodeApprovalAnswered(t *testing.T) {
	const cmd = "touch approved.txt"
	policy := &sandbox.Policy{Default: sandbox.Allow, Commands: sandbox.CommandRules{Ask: []string{"touch *"}}}
	f := newFixture(t, fakemodel.Script{Turns: []fakemodel.Turn{{Command: cmd}, {Command: cmd}, {Text: "done"}}}, policy)
	ctx := testCtx(t)
	id := sandbox.ApprovalID(opencode.Name, sandbox.ApproveCommand, cmd)
	for _, c := range []struct {
		name  string
		allow bool
	}{{"approve", true}, {"deny", false}} {
		t.Run(c.name, func(t *testing.T) {
			thread := "t-" + c.name
			first := summarize(t, f.run(t, ctx, thread, "make approved.txt", nil))
			if first.approval == nil || first.approval.ID != id || len(first.files) != 0 {
				t.Fatalf("first run: approval %+v, files %q; want a request for %s and no file", first.approval, first.files, id)
			}
			second := summarize(t, f.runApproved(t, ctx, thread, "go on", nil, map[string]bool{id: c.allow}))
			made := len(second.files) == 1 && second.files[0] == "approved.txt"
			if second.approval != nil || made != c.allow || second.isError == c.allow || second.last.Type != event.RunFinished {
				t.Errorf("answered run (%s): approval %+v, files %q, result %q (error %v), last %s", c.name, second.approval, second.files, second.result, second.isError, second.last.Type)
			}
			t.Logf("opencode --%s %s: first run asked %v, answered run asked %v, file made %v, tool result error %v",
				c.name, id, first.approval != nil, second.approval != nil, made, second.isError)
		})
	}
}
