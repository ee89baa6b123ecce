package opencode_test

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
	"github.com/d10ffeed/corral/harness/opencode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// canaryKey is the API key the real-CLI tests hand opencode; it must never
// show up in an event.
const canaryKey = "sk-corral-canary-8b3d51"

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

// xdgEnv keeps opencode's data, config, cache and state in the test's
// temporary directories.
func xdgEnv(t *testing.T) map[string]string {
	t.Helper()
	d := t.TempDir()
	env := map[string]string{}
	for _, k := range []string{"XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"} {
		env[k] = filepath.Join(d, strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(k, "XDG_"), "_HOME")))
	}
	return env
}

type fixture struct {
	r    *run.Runner
	srv  *fakemodel.Server
	opts map[string]string
	env  map[string]string
}

func newFixture(t *testing.T, script fakemodel.Script, policy *sandbox.Policy) *fixture {
	t.Helper()
	bin := agentBin(t, "opencode")
	srv := fakemodel.New(t, script)
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": canaryKey})
	if err != nil {
		t.Fatal(err)
	}
	def := &sandbox.Definition{ID: "d", Provider: p, Policy: policy, Workspace: &sandbox.Workspace{
		Source:  &sandbox.Source{Git: testutil.BareRepo(t, map[string]string{"README.md": "hello\n"})},
		Secrets: secrets,
	}}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{opencode.Harness{}}, run.Options{PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return &fixture{r: r, srv: srv, env: xdgEnv(t), opts: map[string]string{opencode.OptExecutable: bin, opencode.OptBaseURL: srv.OpenAIURL()}}
}

func (f *fixture) run(t *testing.T, ctx context.Context, thread, prompt string, opts map[string]string) []event.Event {
	t.Helper()
	o := map[string]string{}
	for k, v := range f.opts {
		o[k] = v
	}
	for k, v := range opts {
		o[k] = v
	}
	rec, err := f.r.Start(ctx, run.StartRequest{Definition: "d", Thread: thread, Harness: opencode.Name, Prompt: prompt, Model: fakemodel.ModelID, Options: o, Env: f.env})
	if err != nil {
		t.Fatal(err)
	}
	var evs []event.Event
	if err := f.r.Follow(ctx, rec.ID, 0, func(e store.Event) error {
		ev, err := event.Unmarshal(e.Data)
		if err != nil {
			return err
		}
		if strings.Contains(string(e.Data), canaryKey) {
			t.Errorf("the API key leaked into an event: %s", e.Data)
		}
		evs = append(evs, ev)
		t.Logf("event: %.300s", e.Data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.r.Wait(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	return evs
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// summary is what a run's events say about its one shell call.
type summary struct {
	command  string
	result   string
	isError  bool
	text     string
	files    []string
	session  string
	approval *event.Approval
	last     event.Event
}

func summarize(t *testing.T, evs []event.Event) summary {
	t.Helper()
	var s summary
	calls := map[string]bool{}
	for _, e := range evs {
		switch {
		case e.Type == event.ToolCallStart && e.ToolCallName == "bash":
			calls[e.ToolCallID] = true
		case e.Type == event.ToolCallArgs && calls[e.ToolCallID]:
			var a struct{ Command string }
			_ = json.Unmarshal([]byte(e.Delta), &a)
			s.command = a.Command
		case e.Type == event.ToolCallResult && calls[e.ToolCallID]:
			s.result, s.isError = e.Content, e.IsError
		case e.Type == event.TextMessageContent:
			s.text += e.Delta
		case e.Type == event.Custom && e.Name == event.FileChanged:
			var fc event.FileChange
			if err := json.Unmarshal(e.Value, &fc); err != nil {
				t.Fatal(err)
			}
			s.files = fc.Files
		case e.Type == event.Custom && e.Name == event.SessionStarted:
			var v event.Session
			_ = json.Unmarshal(e.Value, &v)
			s.session = v.ID
		case e.Type == event.Custom && e.Name == event.ApprovalRequested:
			s.approval = new(event.Approval)
			_ = json.Unmarshal(e.Value, s.approval)
		}
	}
	s.last = evs[len(evs)-1]
	return s
}

func TestRealOpenCodeRun(t *testing.T) {
	f := newFixture(t, fakemodel.RunCommandThenSay("echo hello > made.txt", "done"), nil)
	ctx := testCtx(t)
	s := summarize(t, f.run(t, ctx, "t", "make the file", nil))
	if s.last.Type != event.RunFinished {
		t.Fatalf("last event %s %s, want RUN_FINISHED", s.last.Type, s.last.Message)
	}
	if s.command != "echo hello > made.txt" {
		t.Errorf("tool call command %q", s.command)
	}
	var res struct{ ExitCode *int }
	if s.isError || json.Unmarshal([]byte(s.result), &res) != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Errorf("tool result %q (error %v), want exit code 0", s.result, s.isError)
	}
	if s.text != "done" {
		t.Errorf("final text %q, want done", s.text)
	}
	if len(s.files) != 1 || s.files[0] != "made.txt" {
		t.Errorf("file.changed files %q, want made.txt", s.files)
	}
	if s.session == "" {
		t.Fatal("no session.started")
	}
	for _, req := range f.srv.ModelRequests() {
		if got := req.Header.Get("Authorization"); got != "Bearer "+canaryKey {
			t.Errorf("request %s had Authorization %q, want the workspace secret", req.Path, got)
		}
	}

	// The thread's next run resumes the session: the model sees the first
	// conversation.
	s2 := summarize(t, f.run(t, ctx, "t", "and again", nil))
	if s2.last.Type != event.RunFinished || s2.session != s.session {
		t.Errorf("resumed run: last %s, session %q want %q", s2.last.Type, s2.session, s.session)
	}
	reqs := f.srv.ModelRequests()
	if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "make the file") || !strings.Contains(body, "and again") {
		t.Error("the resumed run's model request does not carry the earlier conversation")
	}
}

func TestRealOpenCodeApproval(t *testing.T) {
	policy := &sandbox.Policy{Default: sandbox.Allow, Commands: sandbox.CommandRules{Ask: []string{"echo *"}, Deny: []string{"rm *"}}}
	f := newFixture(t, fakemodel.RunCommandThenSay("echo hello > made.txt", "done"), policy)
	ctx := testCtx(t)

	// The policy asks: opencode rejects the call, the turn ends, and an
	// approval is requested.
	s := summarize(t, f.run(t, ctx, "t", "make the file", nil))
	want := sandbox.ApprovalID(opencode.Name, sandbox.ApproveCommand, "echo hello > made.txt")
	if s.approval == nil || s.approval.ID != want {
		t.Fatalf("approval %+v, want id %q", s.approval, want)
	}
	if !s.isError || s.command != "echo hello > made.txt" || len(s.files) != 0 {
		t.Errorf("the asked command ran: result %q error %v files %q", s.result, s.isError, s.files)
	}

	// Approved, a run (of a fresh thread, so the script starts over) runs
	// it.
	s = summarize(t, f.run(t, ctx, "t2", "make the file", map[string]string{opencode.OptApprovals: `{"` + want + `":true}`}))
	if s.approval != nil || s.isError || s.last.Type != event.RunFinished || len(s.files) != 1 || s.files[0] != "made.txt" {
		t.Errorf("approved run: approval %+v, result %q error %v, files %q, last %s", s.approval, s.result, s.isError, s.files, s.last.Type)
	}
}

func TestRealOpenCodeDenied(t *testing.T) {
	policy := &sandbox.Policy{Default: sandbox.Allow, Commands: sandbox.CommandRules{Deny: []string{"rm *"}}}
	f := newFixture(t, fakemodel.RunCommandThenSay("rm README.md", "not allowed"), policy)
	s := summarize(t, f.run(t, testCtx(t), "t", "remove the readme", nil))
	if !s.isError || !strings.Contains(s.result, "specified a rule") || s.approval != nil {
		t.Errorf("denied command: result %q error %v approval %+v", s.result, s.isError, s.approval)
	}
	if s.last.Type != event.RunFinished || s.text != "not allowed" || len(s.files) != 0 {
		t.Errorf("last %s text %q files %q", s.last.Type, s.text, s.files)
	}
}
