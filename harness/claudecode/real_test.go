package claudecode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/mcpstub"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

var record = flag.Bool("record", false, "run the real claude against the fake model and rewrite the testdata/real-*.ndjson captures")

// quietEnv keeps the CLI off the network beyond the fake model and out of
// the real home directory.
func quietEnv(t testing.TB) map[string]string {
	t.Helper()
	return map[string]string{
		"HOME": t.TempDir(),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_AUTOUPDATER":                      "1",
	}
}

// capture is one recorded stream: the script the fake model plays and the
// request the harness prepares.
type capture struct {
	name    string
	script  fakemodel.Script
	policy  *sandbox.Policy
	options map[string]string
	exit    int
}

var captures = []capture{
	{
		name:   "real-tool-call",
		script: fakemodel.Script{Turns: []fakemodel.Turn{{Thinking: "I will create the file.", Command: "echo hello > made.txt"}, {Text: "Done: made.txt holds hello."}}},
		policy: &sandbox.Policy{Commands: sandbox.CommandRules{Allow: []string{"echo *"}}, Default: sandbox.Deny},
	},
	{
		name: "real-policy",
		script: fakemodel.Script{Turns: []fakemodel.Turn{
			{Command: "rm -f important.txt"}, {Command: "curl -s http://example.invalid/"}, {Command: "cat /etc/hostname"}, {Text: "I could not do it."},
		}},
		policy: &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm *"}, Ask: []string{"curl *"}}, Default: sandbox.Deny},
	},
	{
		name:   "real-is-error",
		script: fakemodel.Script{Turns: []fakemodel.Turn{{Error: &fakemodel.APIError{Status: 404, Type: "not_found_error", Message: "model: no-such-model"}}}},
		policy: &sandbox.Policy{Default: sandbox.Deny},
		exit:   1,
	},
	{
		// A file-editing call: file.changed per tool call. Write, then Edit
		// of the file it wrote, allowed by the permission tool.
		name: "real-write",
		script: fakemodel.Script{Turns: []fakemodel.Turn{
			{Tool: &fakemodel.ToolCall{Name: "Write", Input: json.RawMessage(`{"file_path":"notes.txt","content":"one\n"}`)}},
			{Tool: &fakemodel.ToolCall{Name: "Edit", Input: json.RawMessage(`{"file_path":"notes.txt","old_string":"one","new_string":"two"}`)}},
			{Text: "Wrote and edited notes.txt."},
		}},
		policy: &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm *"}}, FileWrite: sandbox.Allow, Default: sandbox.Allow},
	},
	{
		name:    "real-no-partial",
		script:  fakemodel.ThinkThenSay("Short question, short answer.", "Hello from the fake model."),
		policy:  &sandbox.Policy{Default: sandbox.Deny},
		options: map[string]string{"partialMessages": "false"},
	},
}

// TestRecordCaptures re-records the real CLI's streams (go test -run
// TestRecordCaptures -record ./harness/claudecode/); then run the golden
// test with -update.
func TestRecordCaptures(t *testing.T) {
	if !*record {
		t.Skip("run with -record to re-record the captures")
	}
	bin := testutil.AgentBin(t, "claude")
	for _, c := range captures {
		t.Run(c.name, func(t *testing.T) {
			srv := fakemodel.New(t, c.script)
			h := localHandle(t)
			opts := map[string]string{"executable": bin, "baseURL": srv.URL}
			for k, v := range c.options {
				opts[k] = v
			}
			secrets, _ := sandbox.NewSecrets(map[string]string{claudecode.APIKeySecret: "sk-ant-fake"})
			ctx := testCtx(t)
			inv, err := claudecode.Harness{}.Prepare(ctx, h, harness.Request{
				Run: harness.Run{RunID: "run-rec", ThreadID: "thread-rec"}, Prompt: "Please make the file.", Model: "claude-sonnet-4-5",
				Secrets: secrets, Policy: c.policy, Env: quietEnv(t), Options: opts, WorkspaceRoot: h.WorkspaceRoot(), RunDir: filepath.Join(t.TempDir(), "run.d"),
			})
			if err != nil {
				t.Fatal(err)
			}
			cmd := inv.Command
			cmd.Stdin = bytes.NewReader(inv.Stdin)
			res, err := h.Exec(ctx, cmd)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != c.exit {
				t.Fatalf("exit %d, want %d; stderr %s", res.ExitCode, c.exit, res.Stderr)
			}
			if err := os.WriteFile(filepath.Join("testdata", c.name+".ndjson"), res.Stdout, 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func localHandle(t *testing.T) sandbox.Handle {
	t.Helper()
	h := testutil.LocalSandbox(t)
	testutil.Git(t, h.WorkspaceRoot(), "init", "-q")
	return h
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestRealClaudeThroughRunner runs the real claude in a local sandbox
// through the runner against the fake model: the agent runs one shell
// command (allowed by the policy through the permission tool), then
// answers; a second run in the thread resumes the session.
func TestRealClaudeThroughRunner(t *testing.T) {
	bin := testutil.AgentBin(t, "claude")
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{
		{Command: "echo hello > made.txt"},
		{Text: "done"},
		{Text: "resumed"},
	}})
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	secrets, _ := sandbox.NewSecrets(map[string]string{claudecode.APIKeySecret: "sk-ant-fake-key"})
	def := &sandbox.Definition{
		ID: "claude", Provider: p,
		Workspace: &sandbox.Workspace{Source: &sandbox.Source{Git: testutil.BareRepo(t, map[string]string{"README.md": "hi\n"})}, Secrets: secrets},
		Policy:    &sandbox.Policy{Commands: sandbox.CommandRules{Allow: []string{"echo *"}, Deny: []string{"rm *"}}, Default: sandbox.Deny},
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

	rec, err := r.Start(ctx, run.StartRequest{Definition: "claude", Thread: "t1", Harness: claudecode.Name, Prompt: "Make made.txt.", Model: "claude-sonnet-4-5", Env: env, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	evs := follow(t, r, ctx, rec.ID)
	var (
		callID, args, result, text string
		session                    string
		files                      []string
	)
	for _, e := range evs {
		switch {
		case e.Type == event.ToolCallStart && e.ToolCallName == "Bash":
			callID = e.ToolCallID
		case e.Type == event.ToolCallArgs && e.ToolCallID == callID:
			args += e.Delta
		case e.Type == event.ToolCallResult && e.ToolCallID == callID:
			result = e.Content
			if e.IsError {
				t.Errorf("the allowed command failed: %s", e.Content)
			}
		case e.Type == event.TextMessageContent:
			text += e.Delta
		case e.Type == event.Custom && e.Name == event.SessionStarted:
			var s event.Session
			_ = json.Unmarshal(e.Value, &s)
			session = s.ID
		case e.Type == event.Custom && e.Name == event.FileChanged:
			var fc event.FileChange
			_ = json.Unmarshal(e.Value, &fc)
			files = fc.Files
		}
	}
	var input struct{ Command string }
	if err := json.Unmarshal([]byte(args), &input); err != nil || input.Command != "echo hello > made.txt" {
		t.Errorf("tool call %q args %q (%v)", callID, args, err)
	}
	if callID == "" || result == "" {
		t.Errorf("tool call %q result %q", callID, result)
	}
	if text != "done" {
		t.Errorf("text %q, want done", text)
	}
	if strings.Join(files, ",") != "made.txt" {
		t.Errorf("file.changed lists %v, want [made.txt]", files)
	}
	if session == "" {
		t.Error("no session.started event")
	}
	if last := evs[len(evs)-1]; last.Type != event.RunFinished {
		t.Errorf("last event %+v", last)
	}
	for _, req := range srv.Requests() {
		if bytes.Contains(req.Body, []byte("sk-ant-fake-key")) {
			t.Error("the API key reached a request body")
		}
	}
	if k := srv.ModelRequests()[0].Header.Get("X-Api-Key"); k != "sk-ant-fake-key" {
		t.Errorf("the CLI sent x-api-key %q", k)
	}
	for _, e := range evs {
		if bytes.Contains(e.Marshal(), []byte("sk-ant-fake-key")) {
			t.Errorf("the API key is in an event: %s", e.Marshal())
		}
	}
	_ = r.Wait(ctx, rec.ID)

	// The thread's next run resumes the session: the model sees the first
	// run's turns and plays the script's third turn.
	rec2, err := r.Start(ctx, run.StartRequest{Definition: "claude", Thread: "t1", Harness: claudecode.Name, Prompt: "And now?", Model: "claude-sonnet-4-5", Env: env, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	text, session2, failed := turnText(t, ctx, r, rec2.ID)
	if failed {
		t.Error("the session was not resumed")
	}
	if text != "resumed" || session2 != session {
		t.Errorf("second run: text %q session %q (first %q)", text, session2, session)
	}
}

func follow(t *testing.T, r *run.Runner, ctx context.Context, id string) []event.Event {
	t.Helper()
	var out []event.Event
	err := r.Follow(ctx, id, 0, func(e store.Event) error {
		ev, err := event.Unmarshal(e.Data)
		if err != nil {
			return err
		}
		out = append(out, ev)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no events")
	}
	if last := out[len(out)-1]; last.Type == event.RunError {
		rec, _, _ := r.Store().GetRun(ctx, id)
		t.Fatalf("run failed: %+v (record error %q)", last, rec.Error)
	}
	return out
}

// TestRealClaudeProjection runs the real claude through the runner with a
// workspace that has a skill, a stdio MCP server whose environment names a
// secret and an http MCP server whose Authorization header names another:
// the model's request lists the skill (through the per-run plugin) and
// both servers' tools, whose descriptions carry digests of the secrets the
// servers received, so the ${VAR} references in the MCP config were
// expanded. The policy has a rule, so the permission tool's server shares
// the config file. The secrets show nowhere, nothing is written into the
// workspace, and the run directory is gone afterwards.
func TestRealClaudeProjection(t *testing.T) {
	bin := testutil.AgentBin(t, "claude")
	if _, err := exec.LookPath("node"); err != nil {
		testutil.Unavailable(t, "node is not installed (the MCP stub server needs it)")
	}
	const (
		// "${HOME}" in the value: it must reach the stdio server literally,
		// not expanded again by the CLI. (The CLI expands header values a
		// second time, so the header's secret holds no "${".)
		token  = "probe-token-${HOME}-6b1f0c9e2d"
		rtoken = "remote-token-0a4f5e77c3"
		marker = "corral-skill-marker-41d7a3"
		answer = "projection checked"
	)
	// The model calls the stdio server's tool, then answers: the server is
	// usable, not only listed.
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{
		{Tool: &fakemodel.ToolCall{Name: "mcp__probe__" + mcpstub.ToolName("probe"), Input: json.RawMessage(`{}`)}},
		{Text: answer},
	}})
	remote := mcpstub.NewHTTP(t, "remote")
	base, journals := t.TempDir(), filepath.Join(t.TempDir(), "journals")
	p, err := local.New(local.Options{BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	secrets, _ := sandbox.NewSecrets(map[string]string{claudecode.APIKeySecret: "sk-ant-fake-key", "PROBE_TOKEN": token, "REMOTE_TOKEN": rtoken})
	def := &sandbox.Definition{
		ID: "claude", Provider: p,
		Workspace: &sandbox.Workspace{
			Source:       &sandbox.Source{Git: testutil.BareRepo(t, map[string]string{"README.md": "hi\n"})},
			Skills:       []sandbox.Skill{{Path: "skills/probe/SKILL.md", Content: "---\nname: probe\ndescription: " + marker + "\n---\n\nSay the marker.\n"}},
			Instructions: "Always mention " + instructionsMarker + ".",
			Secrets:      secrets,
			MCPServers: []sandbox.MCPServer{{
				Name: "probe", Command: "node", Args: []string{mcpstub.Write(t), "probe"},
				Env: map[string]string{mcpstub.TokenEnv: "${secret:PROBE_TOKEN}"},
			}, {
				Name: "remote", URL: remote.URL(),
				Headers: map[string]string{"Authorization": "Bearer ${secret:REMOTE_TOKEN}"},
			}},
		},
		Policy: &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm *"}}, Default: sandbox.Allow},
	}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{claudecode.Harness{}}, run.Options{PollInterval: 50 * time.Millisecond, JournalDir: journals})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	ctx := testCtx(t)
	env := quietEnv(t)
	// MCP tools are otherwise deferred behind tool search: the request
	// would carry the tool's name but not its description.
	env["ENABLE_TOOL_SEARCH"] = "false"
	rec, err := r.Start(ctx, run.StartRequest{Definition: "claude", Thread: "t1", Harness: claudecode.Name, Prompt: "Check the projection.", Model: "claude-sonnet-4-5", Env: env,
		Options: map[string]string{"executable": bin, "baseURL": srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	evs := follow(t, r, ctx, rec.ID)
	if err := r.Wait(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}

	var text, called, result string
	for _, e := range evs {
		switch {
		case e.Type == event.ToolCallStart:
			called = e.ToolCallName
		case e.Type == event.ToolCallResult:
			result = e.Content
		case e.Type == event.TextMessageContent:
			text += e.Delta
		case e.Type == event.Custom && e.Name == event.FileChanged:
			var fc event.FileChange
			_ = json.Unmarshal(e.Value, &fc)
			if len(fc.Files) > 0 {
				t.Errorf("the projection changed the workspace: %v", fc.Files)
			}
		}
		if bytes.Contains(e.Marshal(), []byte(token)) || bytes.Contains(e.Marshal(), []byte(rtoken)) {
			t.Errorf("the secret is in an event: %s", e.Marshal())
		}
	}
	if text != answer {
		t.Errorf("text %q, want %q", text, answer)
	}
	t.Logf("MCP tool call %s → %s", called, result)
	if called != "mcp__probe__"+mcpstub.ToolName("probe") || !strings.Contains(result, "probed "+mcpstub.Digest(token)) {
		t.Errorf("MCP tool call %q → %q, want mcp__probe__%s → probed %s", called, result, mcpstub.ToolName("probe"), mcpstub.Digest(token))
	}

	reqs := srv.ModelRequests()
	if len(reqs) == 0 {
		t.Fatal("no model request")
	}
	var all []byte
	for _, req := range reqs {
		all = append(all, req.Body...)
		if bytes.Contains(req.Body, []byte(token)) || bytes.Contains(req.Body, []byte(rtoken)) {
			t.Error("the secret reached a model request")
		}
	}
	tool := "mcp__probe__" + mcpstub.ToolName("probe")
	for _, want := range []string{marker, instructionsMarker, pluginSkill("probe"), tool, mcpstub.Digest(token), "mcp__remote__" + mcpstub.ToolName("remote"), "header digest " + mcpstub.Digest("Bearer "+rtoken)} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("no model request mentions %q", want)
		}
	}
	if bytes.Contains(all, []byte(mcpstub.Digest(""))) && !bytes.Contains(all, []byte(mcpstub.Digest(token))) {
		t.Error("the MCP server started without the secret")
	}

	if got := remote.Authorization(); got != "Bearer "+rtoken {
		t.Errorf("the http MCP server got Authorization %q (digest %s), want the secret", got, mcpstub.Digest(got))
	}

	// Nothing left behind: no file under the sandbox base (the workspace
	// with it), the journal directory or the CLI's home (its config and
	// transcripts) holds a secret, and no run directory (<token>.d) is
	// left.
	for _, dir := range []string{base, journals, env["HOME"]} {
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && strings.HasSuffix(d.Name(), ".d") && dir == journals {
				t.Errorf("a run directory is left: %s", p)
			}
			if d.Type().IsRegular() {
				if b, err := os.ReadFile(p); err == nil && (bytes.Contains(b, []byte(token)) || bytes.Contains(b, []byte(rtoken))) {
					t.Errorf("the secret is in %s", p)
				}
			}
			return nil
		})
	}
}

// instructionsMarker is in the projection test's workspace instructions
// (AGENTS.md, with CLAUDE.md linked to it).
const instructionsMarker = "corral-instructions-marker-9b2e"

// pluginSkill is how the CLI lists a skill of the per-run plugin.
func pluginSkill(name string) string { return "corral-workspace:" + name }
