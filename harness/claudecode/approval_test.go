package claudecode_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// TestRealClaudeApprovalAnswered: a policy that asks before `touch *`.
// The thread's first run asks (approval.requested, the command not run);
// its next run carries the answer, as `corral run --thread T --approve ID`
// (or --deny) gives it, and the resumed session's retry of the command is
// allowed (the file is made, file.changed lists it) or refused without a
// second request.
func TestRealClaudeApprovalAnswered(t *testing.T) {
	bin := testutil.AgentBin(t, "claude")
	const cmd = "touch approved.txt"
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{
		{Command: cmd}, {Text: "it needs approval"}, {Command: cmd}, {Text: "done"},
	}})
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	secrets, _ := sandbox.NewSecrets(map[string]string{claudecode.APIKeySecret: "sk-ant-fake-key"})
	def := &sandbox.Definition{
		ID: "claude", Provider: p,
		Workspace: &sandbox.Workspace{Source: &sandbox.Source{Git: testutil.BareRepo(t, map[string]string{"README.md": "hi\n"})}, Secrets: secrets},
		Policy:    &sandbox.Policy{Commands: sandbox.CommandRules{Ask: []string{"touch *"}}, Default: sandbox.Allow},
	}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{claudecode.Harness{}}, run.Options{PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	ctx := testCtx(t)
	env := quietEnv(t)
	opts := map[string]string{"executable": bin, "baseURL": srv.URL}
	id := sandbox.ApprovalID(claudecode.Name, sandbox.ApproveCommand, cmd)

	for _, c := range []struct {
		name  string
		allow bool
	}{{"approve", true}, {"deny", false}} {
		t.Run(c.name, func(t *testing.T) {
			thread := "t-" + c.name
			first := approvalRun(t, ctx, r, run.StartRequest{Definition: "claude", Thread: thread, Harness: claudecode.Name, Prompt: "make approved.txt", Env: env, Options: opts})
			if len(first.asked) != 1 || first.asked[0] != id || len(first.files) != 0 {
				t.Fatalf("first run: asked %q, files %q; want one request for %s and no file", first.asked, first.files, id)
			}
			second := approvalRun(t, ctx, r, run.StartRequest{Definition: "claude", Thread: thread, Harness: claudecode.Name, Prompt: "go on", Env: env, Options: opts,
				Approvals: map[string]bool{id: c.allow}})
			made := strings.Join(second.files, ",") == "approved.txt"
			if len(second.asked) != 0 || made != c.allow || second.status != store.RunCompleted {
				t.Errorf("answered run (%s): asked %q, files %q, status %s, results %q", c.name, second.asked, second.files, second.status, second.results)
			}
			t.Logf("claude-code --%s %s: first run asked %d, answered run asked %d, file made %v, tool results %q",
				c.name, id, len(first.asked), len(second.asked), made, second.results)
		})
	}
}

type approvalOutcome struct {
	asked, files, results []string
	status                store.RunStatus
}

// approvalRun runs req to its end and collects its approval requests,
// changed files and tool results.
func approvalRun(t *testing.T, ctx context.Context, r *run.Runner, req run.StartRequest) approvalOutcome {
	t.Helper()
	rec, err := r.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var o approvalOutcome
	for _, e := range follow(t, r, ctx, rec.ID) {
		switch {
		case e.Type == event.ToolCallResult:
			o.results = append(o.results, e.Content)
		case e.Type == event.Custom && e.Name == event.ApprovalRequested:
			var a event.Approval
			_ = json.Unmarshal(e.Value, &a)
			o.asked = append(o.asked, a.ID)
		case e.Type == event.Custom && e.Name == event.FileChanged:
			var fc event.FileChange
			_ = json.Unmarshal(e.Value, &fc)
			o.files = fc.Files
		}
	}
	if err := r.Wait(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	final, _, _ := r.Store().GetRun(ctx, rec.ID)
	o.status = final.Status
	return o
}
