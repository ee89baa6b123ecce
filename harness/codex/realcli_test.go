package codex_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// canaryKey is the API key the real-CLI tests hand codex; it must never
// show up in an event.
const canaryKey = "sk-corral-canary-4f1c9e"

// agentBin returns the pinned CLI installed by scripts/setup-agents.sh, or
// skips (fails under CI=true).
func agentBin(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("CORRAL_AGENTS_DIR")
	if dir == "" {
		dir = "/opt/corral-agents"
	}
	bin := filepath.Join(dir, "node_modules", ".bin", name)
	if _, err := os.Stat(bin); err != nil {
		testutil.Unavailable(t, name+": not installed at "+bin+" (run scripts/setup-agents.sh)")
	}
	return bin
}

func TestRealCodexRun(t *testing.T) {
	bin := agentBin(t, "codex")
	srv := fakemodel.New(t, fakemodel.RunCommandThenSay("echo hello > made.txt", "done"))
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": canaryKey})
	if err != nil {
		t.Fatal(err)
	}
	def := &sandbox.Definition{ID: "d", Provider: p, Workspace: &sandbox.Workspace{
		Source:  &sandbox.Source{Git: testutil.BareRepo(t, map[string]string{"README.md": "hello\n"})},
		Secrets: secrets,
	}}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{codex.Harness{}}, run.Options{PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts := map[string]string{codex.OptExecutable: bin, codex.OptBaseURL: srv.OpenAIURL(), codex.OptSessionsDir: t.TempDir()}

	evs := runToEnd(t, ctx, r, run.StartRequest{Definition: "d", Thread: "t", Harness: codex.Name, Prompt: "make the file", Model: fakemodel.ModelID, Options: opts})
	if last := evs[len(evs)-1]; last.Type != event.RunFinished {
		t.Fatalf("last event %s %s, want RUN_FINISHED", last.Type, last.Message)
	}
	var call, result, text string
	var sawResult, sawFile bool
	var session event.Session
	for _, e := range evs {
		if strings.Contains(string(e.Marshal()), canaryKey) {
			t.Fatalf("the API key leaked into an event: %s", e.Marshal())
		}
		switch {
		case e.Type == event.ToolCallStart && e.ToolCallName == codex.ToolCommand:
			call = e.ToolCallID
		case e.Type == event.ToolCallArgs && e.ToolCallID == call:
			var a struct{ Command string }
			if json.Unmarshal([]byte(e.Delta), &a) != nil || a.Command != "echo hello > made.txt" {
				t.Errorf("tool call args %s, want the command echo hello > made.txt", e.Delta)
			}
		case e.Type == event.ToolCallResult && e.ToolCallID == call:
			sawResult, result = true, e.Content
			var res struct{ ExitCode *int }
			if e.IsError || json.Unmarshal([]byte(e.Content), &res) != nil || res.ExitCode == nil || *res.ExitCode != 0 {
				t.Errorf("tool result %+v, want exit code 0 and no error", e)
			}
		case e.Type == event.TextMessageContent:
			text += e.Delta
		case e.Type == event.Custom && e.Name == event.FileChanged:
			var fc event.FileChange
			if err := json.Unmarshal(e.Value, &fc); err != nil || !contains(fc.Files, "made.txt") {
				t.Errorf("file.changed %s, want made.txt", e.Value)
			}
			sawFile = true
		case e.Type == event.Custom && e.Name == event.SessionStarted:
			_ = json.Unmarshal(e.Value, &session)
		}
	}
	if call == "" || !sawResult {
		t.Fatalf("no command tool call with a result (result %q)", result)
	}
	if text != "done" {
		t.Errorf("final text %q, want done", text)
	}
	if !sawFile {
		t.Error("no file.changed event")
	}
	if session.ID == "" {
		t.Fatal("no session.started event")
	}
	for _, req := range srv.Requests() {
		if got := req.Header.Get("Authorization"); req.Turn >= 0 && got != "Bearer "+canaryKey {
			t.Errorf("request %s had Authorization %q, want the workspace secret", req.Path, got)
		}
	}

	// The thread's next run resumes the codex session.
	before := len(srv.ModelRequests())
	evs = runToEnd(t, ctx, r, run.StartRequest{Definition: "d", Thread: "t", Harness: codex.Name, Prompt: "and again", Model: fakemodel.ModelID, Options: opts})
	if last := evs[len(evs)-1]; last.Type != event.RunFinished {
		t.Fatalf("resumed run: last event %s %s", last.Type, last.Message)
	}
	var again event.Session
	for _, e := range evs {
		if e.Type == event.Custom && e.Name == event.SessionStarted {
			_ = json.Unmarshal(e.Value, &again)
		}
	}
	if again.ID != session.ID {
		t.Errorf("resumed session %q, want %q", again.ID, session.ID)
	}
	reqs := srv.ModelRequests()
	if len(reqs) <= before || !strings.Contains(string(reqs[len(reqs)-1].Body), "make the file") {
		t.Error("the resumed run's model request does not carry the earlier conversation")
	}
}

func runToEnd(t *testing.T, ctx context.Context, r *run.Runner, req run.StartRequest) []event.Event {
	t.Helper()
	rec, err := r.Start(ctx, req)
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
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	for _, e := range evs {
		t.Logf("event: %.300s", e.Marshal())
	}
	if got, _, _ := r.Store().GetRun(ctx, rec.ID); got.Status != store.RunCompleted {
		t.Logf("run record: %+v", got)
	}
	return evs
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
