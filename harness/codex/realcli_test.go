package codex_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/mcpstub"
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

func TestRealCodexRun(t *testing.T) {
	bin := testutil.AgentBin(t, "codex")
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

// TestRealCodexProjection runs the real codex with a workspace skill and a
// stdio MCP server whose environment names a secret, under both auth
// modes, and checks from the model's request what codex saw: the skill's
// description (api-key auth only: host auth keeps the user's CODEX_HOME,
// so no skill is projected), the server's tool, and in its description the
// digest of the secret the server found in its environment, while the
// secret itself shows up nowhere else.
func TestRealCodexProjection(t *testing.T) {
	bin := testutil.AgentBin(t, "codex")
	if _, err := exec.LookPath("node"); err != nil {
		testutil.Unavailable(t, "node is not installed (the MCP stub needs it)")
	}
	for _, auth := range []harness.Auth{harness.AuthAPIKey, harness.AuthHost} {
		t.Run(string(auth), func(t *testing.T) { testRealProjection(t, bin, auth) })
	}
}

func testRealProjection(t *testing.T, bin string, auth harness.Auth) {
	const (
		token  = "probe-token-secret-93be1d"
		marker = "corral-skill-marker-5e0a7c"
	)
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{{Tool: &fakemodel.ToolCall{Name: mcpstub.ToolName("probe"), Namespace: "mcp__probe", Input: json.RawMessage(`{}`)}}, {Text: "done"}}})
	base := t.TempDir()
	p, err := local.New(local.Options{BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": canaryKey, "PROBE_TOKEN": token})
	if err != nil {
		t.Fatal(err)
	}
	def := &sandbox.Definition{ID: "d", Provider: p, Workspace: &sandbox.Workspace{
		Source:       &sandbox.Source{Git: testutil.BareRepo(t, map[string]string{"README.md": "hello\n"})},
		Skills:       []sandbox.Skill{{Path: "skills/probe/SKILL.md", Content: "---\nname: probe\ndescription: " + marker + "\n---\n\nSay probe.\n"}},
		Instructions: "Always mention " + instructionsMarker + ".",
		MCPServers: []sandbox.MCPServer{
			{Name: "probe", Command: "node", Args: []string{mcpstub.Write(t), "probe"},
				Env: map[string]string{mcpstub.TokenEnv: "${secret:PROBE_TOKEN}", "CORRAL_PROBE_MODE": "plain"}},
			{Name: "web", URL: mcpstub.NewHTTP(t, "web").URL(), Headers: map[string]string{"Authorization": "Bearer ${secret:PROBE_TOKEN}", "X-Probe": "plain"}},
		},
		Secrets: secrets,
	}}
	journals := t.TempDir()
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{codex.Harness{}}, run.Options{PollInterval: 50 * time.Millisecond, JournalDir: journals})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sessions := t.TempDir()
	start := run.StartRequest{Definition: "d", Thread: "t", Harness: codex.Name, Prompt: "say done", Model: fakemodel.ModelID, Auth: auth,
		Options: map[string]string{codex.OptExecutable: bin}}
	var userConfig []byte
	if auth == harness.AuthAPIKey {
		start.Options[codex.OptBaseURL] = srv.OpenAIURL()
		start.Options[codex.OptSessionsDir] = sessions
	} else {
		// The "user's own" codex home: a provider for the fake model whose
		// key is in a variable host auth leaves alone.
		sessions = t.TempDir()
		userConfig = []byte("model_provider = \"fake\"\n\n[model_providers.fake]\nname = \"fake\"\nbase_url = \"" + srv.OpenAIURL() +
			"\"\nenv_key = \"CORRAL_FAKE_KEY\"\nwire_api = \"responses\"\n")
		if err := os.WriteFile(filepath.Join(sessions, "config.toml"), userConfig, 0o600); err != nil {
			t.Fatal(err)
		}
		start.Env = map[string]string{"CODEX_HOME": sessions, "CORRAL_FAKE_KEY": canaryKey}
	}

	evs := runToEnd(t, ctx, r, start)
	if last := evs[len(evs)-1]; last.Type != event.RunFinished {
		t.Fatalf("last event %s %s, want RUN_FINISHED", last.Type, last.Message)
	}
	var called, result string
	for _, e := range evs {
		if s := string(e.Marshal()); strings.Contains(s, token) || strings.Contains(s, canaryKey) {
			t.Fatalf("a secret leaked into an event: %s", s)
		}
		switch e.Type {
		case event.ToolCallStart:
			called = e.ToolCallName
		case event.ToolCallResult:
			result = e.Content
		}
	}
	// The model called the stdio server's tool (codex namespaces it
	// mcp__probe): the server is usable, not only listed.
	t.Logf("MCP tool call %s → %s", called, result)
	if called != "mcp__probe__"+mcpstub.ToolName("probe") || !strings.Contains(result, "probed "+mcpstub.Digest(token)) {
		t.Errorf("MCP tool call %q → %q, want mcp__probe__%s → probed %s", called, result, mcpstub.ToolName("probe"), mcpstub.Digest(token))
	}
	reqs := srv.ModelRequests()
	if len(reqs) == 0 {
		t.Fatal("no model request")
	}
	body := string(reqs[0].Body)
	if os.Getenv("CORRAL_DUMP_REQUEST") != "" {
		t.Logf("first model request: %s", body)
	}
	// The workspace's instructions (AGENTS.md) reach the model.
	if !strings.Contains(body, instructionsMarker) {
		t.Error("the model request lacks the workspace instructions (AGENTS.md)")
	}
	// The skill is listed with its description (api-key auth only).
	if got, want := strings.Contains(body, marker), auth == harness.AuthAPIKey; got != want {
		t.Errorf("the model request lists the workspace skill: %v, want %v", got, want)
	}
	// The tool is offered (codex puts it in a namespace mcp__probe) and its
	// description carries the digest of the token the server got.
	var offered struct{ Tools []json.RawMessage }
	if err := json.Unmarshal(reqs[0].Body, &offered); err != nil {
		t.Fatal(err)
	}
	if desc, ok := findTool(offered.Tools, mcpstub.ToolName("probe")); !ok {
		t.Errorf("the model request does not offer the MCP tool %s", mcpstub.ToolName("probe"))
	} else if !strings.Contains(desc, mcpstub.Digest(token)) {
		t.Errorf("the MCP tool's description %q lacks the token digest %s (the server did not get the secret)", desc, mcpstub.Digest(token))
	}
	// The remote server got the secret header (and the plain one).
	if desc, ok := findTool(offered.Tools, mcpstub.ToolName("web")); !ok {
		t.Errorf("the model request does not offer the MCP tool %s", mcpstub.ToolName("web"))
	} else if want := mcpstub.Digest("Bearer "+token) + " plain"; !strings.Contains(desc, want) {
		t.Errorf("the remote MCP tool's description %q lacks %q (the server did not get the headers)", desc, want)
	}
	for _, req := range srv.Requests() {
		if strings.Contains(string(req.Body), token) {
			t.Errorf("the token is in a request to the model (%s)", req.Path)
		}
	}
	// No file in the sandbox, the journals or codex's home and sessions
	// holds the token, and the run's private directory is gone.
	for _, dir := range []string{base, journals, sessions} {
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), token) {
				t.Errorf("the token is in %s", p)
			}
			return nil
		})
	}
	if left, _ := filepath.Glob(filepath.Join(journals, "*.d")); len(left) > 0 {
		t.Errorf("run directories left after the run: %q", left)
	}
	if auth == harness.AuthHost {
		if b, err := os.ReadFile(filepath.Join(sessions, "config.toml")); err != nil || string(b) != string(userConfig) {
			t.Errorf("host auth changed the user's config.toml (%v):\n%s", err, b)
		}
		if _, err := os.Lstat(filepath.Join(sessions, "skills", "probe")); !os.IsNotExist(err) {
			t.Errorf("host auth wrote a skill into the user's CODEX_HOME (%v)", err)
		}
	}
}

// findTool looks for a function tool by name among the request's tools,
// inside namespaces too, and returns its description.
func findTool(tools []json.RawMessage, name string) (string, bool) {
	for _, raw := range tools {
		var tl struct {
			Type, Name, Description string
			Tools                   []json.RawMessage
		}
		if json.Unmarshal(raw, &tl) != nil {
			continue
		}
		if tl.Name == name && tl.Type == "function" {
			return tl.Description, true
		}
		if d, ok := findTool(tl.Tools, name); ok {
			return d, true
		}
	}
	return "", false
}

// instructionsMarker is in the projection test's workspace instructions.
const instructionsMarker = "corral-instructions-marker-c4d1"

// TestRealCodexMCPApproval: the policy asks before the agent calls an MCP
// server's tools. The first run's call is refused and raises
// approval.requested (codex:tool:mcp__probe); the run that carries the
// answer gets the tool's result.
func TestRealCodexMCPApproval(t *testing.T) {
	bin := testutil.AgentBin(t, "codex")
	if _, err := exec.LookPath("node"); err != nil {
		testutil.Unavailable(t, "node is not installed (the MCP stub needs it)")
	}
	const token = "probe-token-approval-2c81"
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{
		{Tool: &fakemodel.ToolCall{Name: mcpstub.ToolName("probe"), Namespace: "mcp__probe", Input: json.RawMessage(`{}`)}},
		{Text: "done"},
	}})
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": canaryKey, "PROBE_TOKEN": token})
	if err != nil {
		t.Fatal(err)
	}
	def := &sandbox.Definition{ID: "d", Provider: p, Policy: &sandbox.Policy{Default: sandbox.Ask}, Workspace: &sandbox.Workspace{
		MCPServers: []sandbox.MCPServer{{Name: "probe", Command: "node", Args: []string{mcpstub.Write(t), "probe"},
			Env: map[string]string{mcpstub.TokenEnv: "${secret:PROBE_TOKEN}"}}},
		Secrets: secrets,
	}}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{codex.Harness{}}, run.Options{PollInterval: 50 * time.Millisecond, JournalDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := func(thread string, approvals map[string]bool) (results []string, asked []event.Approval) {
		t.Helper()
		// policy=best-effort: a default of ask cannot confine codex's
		// commands (an allow-list), which the strict mode refuses.
		evs := runToEnd(t, ctx, r, run.StartRequest{Definition: "d", Thread: thread, Harness: codex.Name, Prompt: "call the probe", Model: fakemodel.ModelID,
			Options:   map[string]string{codex.OptExecutable: bin, codex.OptBaseURL: srv.OpenAIURL(), codex.OptSessionsDir: t.TempDir(), codex.OptPolicy: "best-effort"},
			Approvals: approvals})
		for _, e := range evs {
			switch {
			case e.Type == event.ToolCallResult:
				results = append(results, e.Content)
			case e.Type == event.Custom && e.Name == event.ApprovalRequested:
				var a event.Approval
				if err := json.Unmarshal(e.Value, &a); err != nil {
					t.Fatal(err)
				}
				asked = append(asked, a)
			}
		}
		return results, asked
	}
	results, asked := start("a", nil)
	t.Logf("first run: results %q, approvals %+v", results, asked)
	want := sandbox.ApprovalID(codex.Name, sandbox.ApproveTool, "mcp__probe")
	if len(asked) != 1 || asked[0].ID != want {
		t.Fatalf("approvals %+v, want one for %s", asked, want)
	}
	if len(results) != 1 || !strings.Contains(results[0], "requires approval") {
		t.Errorf("the unanswered call should be refused: %q", results)
	}
	results, asked = start("b", map[string]bool{want: true})
	t.Logf("answered run: results %q, approvals %+v", results, asked)
	if len(asked) != 0 || len(results) != 1 || !strings.Contains(results[0], "probed "+mcpstub.Digest(token)) {
		t.Errorf("with the answer: results %q, approvals %+v; want the tool's result and no approval", results, asked)
	}
}
