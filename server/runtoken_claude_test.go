package server_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// TestRealClaudeAgentTools: the real Claude Code CLI, against the fake
// model, finds the corral-tools server the runner projected (its tools
// are in the model's request) and saves a checkpoint with it; the token
// reaches no model request and no event.
func TestRealClaudeAgentTools(t *testing.T) {
	bin := testutil.AgentBin(t, "claude")
	const tool = "mcp__" + run.AgentToolsServer + "__save_checkpoint"
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{
		{Tool: &fakemodel.ToolCall{Name: tool, Input: json.RawMessage(`{"label":"by-claude"}`)}},
		{Text: "Saved."},
	}})
	secrets, err := sandbox.NewSecrets(map[string]string{claudecode.APIKeySecret: "sk-ant-fake-key"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{Tokens: map[string]string{"claude-tenant-token": "acme"}, ToolsKey: bytes.Repeat([]byte{9}, 32),
		Workspace: &sandbox.Workspace{Secrets: secrets}, Extra: []harness.Harness{claudecode.Harness{}}})
	c := testCtx(t, 3*time.Minute)
	env := map[string]string{"HOME": t.TempDir(), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
		// MCP tools are otherwise deferred behind tool search.
		"ENABLE_TOOL_SEARCH": "false"}
	rec, err := e.Runner.Start(c, run.StartRequest{Tenant: "acme", Definition: "default", Thread: "claude-tools", Harness: claudecode.Name,
		Prompt: "Save a checkpoint.", Model: "claude-sonnet-4-5", Env: env, Options: map[string]string{"executable": bin, "baseURL": srv.URL, "isSandbox": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	done := e.waitStatus(rec.ID, store.RunCompleted, 2*time.Minute)
	tok := e.Tools.Token(done)
	evs, err := e.Store.ReadEvents(c, rec.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var called, result string
	for _, se := range evs {
		if bytes.Contains(se.Data, []byte(tok)) {
			t.Errorf("event %d holds the run token", se.Seq)
		}
		ev, err := event.Unmarshal(se.Data)
		if err != nil {
			continue
		}
		switch ev.Type {
		case event.ToolCallStart:
			called = ev.ToolCallName
		case event.ToolCallResult:
			result = ev.Content
		}
	}
	t.Logf("tool call %s → %s", called, result)
	var all []byte
	for _, req := range srv.ModelRequests() {
		all = append(all, req.Body...)
	}
	for _, want := range []string{tool, "mcp__" + run.AgentToolsServer + "__list_checkpoints", "mcp__" + run.AgentToolsServer + "__fork_checkpoint"} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("no model request lists %s", want)
		}
	}
	if bytes.Contains(all, []byte(tok)) {
		t.Error("the run token reached a model request")
	}
	cps, err := e.Store.ListCheckpoints(c, "acme", "claude-tools")
	if err != nil {
		t.Fatal(err)
	}
	saved := false
	for _, cp := range cps {
		saved = saved || (cp.Label == "by-claude" && cp.SourceRunID == rec.ID)
	}
	if called != tool || !saved || !strings.Contains(result, "checkpointId") {
		t.Fatalf("claude's %q → %q; checkpoints %+v: want by-claude saved", called, result, cps)
	}
}
