package opencode_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/opencode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/mcpstub"
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

// xdgEnv keeps opencode's data, config, cache and state in the test's
// temporary directories.
func xdgEnv(t testing.TB) map[string]string {
	t.Helper()
	d := t.TempDir()
	env := map[string]string{}
	for _, k := range []string{"XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"} {
		env[k] = filepath.Join(d, strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(k, "XDG_"), "_HOME")))
	}
	return env
}

type fixture struct {
	r        *run.Runner
	srv      *fakemodel.Server
	opts     map[string]string
	env      map[string]string
	base     string // the local provider's directory (the sandboxes)
	journals string // the journal directory
	def      *sandbox.Definition
}

// runner is another runner on the fixture's store and journals (another
// host), with a short lease.
func (f *fixture) runner(t testing.TB) *run.Runner {
	t.Helper()
	r, err := run.New(f.r.Store(), []*sandbox.Definition{f.def}, []harness.Harness{opencode.Harness{}}, run.Options{PollInterval: 50 * time.Millisecond, JournalDir: f.journals, LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func newFixture(t testing.TB, script fakemodel.Script, policy *sandbox.Policy) *fixture {
	t.Helper()
	return newWorkspaceFixture(t, script, policy, nil, nil)
}

// newWorkspaceFixture is newFixture with more secrets, and the workspace
// edited by ws.
func newWorkspaceFixture(t testing.TB, script fakemodel.Script, policy *sandbox.Policy, secrets map[string]string, ws func(*sandbox.Workspace)) *fixture {
	t.Helper()
	bin := testutil.AgentBin(t, "opencode")
	srv := fakemodel.New(t, script)
	base, journals := t.TempDir(), t.TempDir()
	p, err := local.New(local.Options{BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{"OPENAI_API_KEY": canaryKey}
	for k, v := range secrets {
		values[k] = v
	}
	sec, err := sandbox.NewSecrets(values)
	if err != nil {
		t.Fatal(err)
	}
	def := &sandbox.Definition{ID: "d", Provider: p, Policy: policy, Workspace: &sandbox.Workspace{
		Source:  &sandbox.Source{Git: testutil.BareRepo(t, map[string]string{"README.md": "hello\n"})},
		Secrets: sec,
	}}
	if ws != nil {
		ws(def.Workspace)
	}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{opencode.Harness{}}, run.Options{PollInterval: 50 * time.Millisecond, JournalDir: journals})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return &fixture{r: r, srv: srv, env: xdgEnv(t), base: base, journals: journals, def: def,
		opts: map[string]string{opencode.OptExecutable: bin, opencode.OptBaseURL: srv.OpenAIURL()}}
}

// options is the fixture's options with each of more laid over them in
// turn.
func (f *fixture) options(more ...map[string]string) map[string]string {
	o := maps.Clone(f.opts)
	for _, m := range more {
		maps.Copy(o, m)
	}
	return o
}

func (f *fixture) run(t *testing.T, ctx context.Context, thread, prompt string, opts map[string]string) []event.Event {
	t.Helper()
	return f.runApproved(t, ctx, thread, prompt, opts, nil)
}

// runApproved is run with answers to earlier approval requests.
func (f *fixture) runApproved(t *testing.T, ctx context.Context, thread, prompt string, opts map[string]string, approvals map[string]bool) []event.Event {
	t.Helper()
	rec, err := f.r.Start(ctx, run.StartRequest{Definition: "d", Thread: thread, Harness: opencode.Name, Prompt: prompt, Model: fakemodel.ModelID, Options: f.options(opts), Approvals: approvals, Env: f.env})
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

func testCtx(t testing.TB) context.Context {
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
	s = summarize(t, f.runApproved(t, ctx, "t2", "make the file", nil, map[string]bool{want: true}))
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

// TestRealOpenCodeProjection runs opencode with a workspace skill and a
// stdio MCP server whose environment names a secret: the model sees the
// skill and the server's tool, the server got the secret, and the secret
// is in no request, event or file.
func TestRealOpenCodeProjection(t *testing.T) {
	for _, mode := range []string{opencode.ModeRun, opencode.ModeServer} {
		t.Run(mode, func(t *testing.T) { testRealProjection(t, mode) })
	}
}

func testRealProjection(t *testing.T, mode string) {
	const (
		// A quote and a backslash: opencode pastes {env:NAME} into its
		// configuration's JSON text unescaped.
		token  = `probe-token-"secret\4c27aa`
		marker = "corral-skill-marker-opencode-d81f3e"
	)
	escaped := strings.Trim(jsonText(token), `"`)
	leaks := func(s string) bool { return strings.Contains(s, token) || strings.Contains(s, escaped) }
	// The model calls the server's tool, then answers: the server is
	// usable, not only listed.
	script := fakemodel.Script{Turns: []fakemodel.Turn{
		{Tool: &fakemodel.ToolCall{Name: "probe_" + mcpstub.ToolName("probe"), Input: json.RawMessage(`{}`)}},
		{Text: "done"},
	}}
	f := newWorkspaceFixture(t, script, nil, map[string]string{"PROBE_TOKEN": token}, func(ws *sandbox.Workspace) {
		ws.Skills = []sandbox.Skill{{Path: "skills/probe/SKILL.md", Content: "---\nname: probe\ndescription: " + marker + "\n---\n\nSay probe.\n"}}
		ws.Instructions = "Always mention " + instructionsMarker + "."
		ws.MCPServers = []sandbox.MCPServer{{Name: "probe", Command: "node", Args: []string{mcpstub.Write(t), "probe"},
			Env: map[string]string{mcpstub.TokenEnv: "${secret:PROBE_TOKEN}"}}}
	})
	evs := f.run(t, testCtx(t), "t", "say done", map[string]string{opencode.OptMode: mode})
	s := summarize(t, evs)
	if s.last.Type != event.RunFinished || s.text != "done" {
		t.Fatalf("last event %s %s, text %q: want RUN_FINISHED and done", s.last.Type, s.last.Message, s.text)
	}
	var called, result string
	for _, e := range evs {
		switch e.Type {
		case event.ToolCallStart:
			called = e.ToolCallName
		case event.ToolCallResult:
			result = e.Content
		}
	}
	t.Logf("MCP tool call %s → %s", called, result)
	if called != "probe_"+mcpstub.ToolName("probe") || !strings.Contains(result, "probed "+mcpstub.Digest(token)) {
		t.Errorf("MCP tool call %q → %q, want probe_%s → probed %s", called, result, mcpstub.ToolName("probe"), mcpstub.Digest(token))
	}
	for _, e := range evs {
		if leaks(string(e.Marshal())) {
			t.Errorf("the token leaked into an event: %s", e.Marshal())
		}
	}
	reqs := f.srv.ModelRequests()
	if len(reqs) == 0 {
		t.Fatal("no model request")
	}
	if os.Getenv("CORRAL_DUMP_REQUEST") != "" {
		for _, r := range reqs {
			t.Logf("model request %s: %s", r.Path, r.Body)
		}
	}
	// The turn's request (opencode may also ask for a title first).
	var body fakemodel.Request
	for _, r := range reqs {
		if strings.Contains(string(r.Body), "say done") && strings.Contains(string(r.Body), `"tools"`) {
			body = r
			break
		}
	}
	if body.Body == nil {
		t.Fatal("no model request for the turn with tools")
	}
	var chat struct {
		Messages []struct{ Role, Content string }
		Tools    []struct {
			Function struct{ Name, Description string }
		}
	}
	if err := json.Unmarshal(body.Body, &chat); err != nil {
		t.Fatal(err)
	}
	tools := map[string]string{}
	for _, tl := range chat.Tools {
		tools[tl.Function.Name] = tl.Function.Description
	}
	// The system prompt lists the workspace skill among the available
	// skills, with its description (opencode reads skills/ at the
	// workspace root only because skills.paths names it).
	var system string
	for _, m := range chat.Messages {
		if m.Role == "system" {
			system += m.Content
		}
	}
	if !strings.Contains(system, instructionsMarker) {
		t.Error("the system prompt lacks the workspace instructions (AGENTS.md)")
	}
	if want := "<name>probe</name>\n    <description>" + marker + "</description>"; !strings.Contains(system, want) {
		t.Errorf("the system prompt does not list the workspace skill %q", want)
	}
	if _, ok := tools["skill"]; !ok {
		t.Error("the model is not offered the skill tool")
	}
	// opencode names an MCP tool SERVER_TOOL; its description carries the
	// digest of the token the server found in its environment.
	name := "probe_" + mcpstub.ToolName("probe")
	if desc, ok := tools[name]; !ok {
		t.Errorf("the model is not offered the MCP tool %s; tools: %q", name, slices.Sorted(maps.Keys(tools)))
	} else if !strings.Contains(desc, mcpstub.Digest(token)) {
		t.Errorf("the MCP tool's description %q lacks the token digest %s (the server did not get the secret)", desc, mcpstub.Digest(token))
	}
	for _, r := range f.srv.Requests() {
		if leaks(string(r.Body)) {
			t.Errorf("the token is in a request to the model (%s)", r.Path)
		}
	}
	// No file in the sandbox (workspace included), the journals or
	// opencode's own directories holds the token, and the run's private
	// directory is gone.
	dirs := []string{f.base, f.journals}
	for _, d := range f.env {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && leaks(string(b)) {
				t.Errorf("the token is in %s", p)
			}
			return nil
		})
	}
	if left, _ := filepath.Glob(filepath.Join(f.journals, "*.d")); len(left) > 0 {
		t.Errorf("run directories left after the run: %q", left)
	}
}

func jsonText(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// instructionsMarker is in the projection test's workspace instructions.
const instructionsMarker = "corral-instructions-marker-7a90"
