package opencode_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/harnesstest"
	"github.com/d10ffeed/corral/harness/opencode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/sandbox"
)

var (
	capture     = flag.Bool("capture", false, "run the real opencode against scripted endpoints and rewrite testdata/real-*.jsonl")
	captureOnly = flag.String("capture-only", "", "with -capture, record only the fixtures whose name contains this")
)

// TestCaptureFixtures records the real-* fixtures: the stdout of the real
// CLI, prepared by the harness, against fakemodel scripts. Workspace paths
// are rewritten to /workspace. Run with -capture, then -update.
func TestCaptureFixtures(t *testing.T) {
	if !*capture {
		t.Skip("run with -capture to record the real-* fixtures")
	}
	bin := testutil.AgentBin(t, "opencode")
	allowAll := &sandbox.Policy{Default: sandbox.Allow}
	type captureCase struct {
		name      string
		script    fakemodel.Script
		policy    *sandbox.Policy
		approvals map[string]bool
		kill      string
		write     bool // the script writes notes.txt with the write tool
		resume    bool
		server    bool // option mode=server (fixture real-server-NAME)
	}
	cases := []captureCase{
		{name: "text", script: fakemodel.Say("Hello from the fake model.")},
		{name: "reasoning", script: fakemodel.ThinkThenSay("Let me think about it.", "Thought it through.")},
		{name: "command", script: fakemodel.RunCommandThenSay("echo hello > made.txt", "done")},
		{name: "command-failed", script: fakemodel.RunCommandThenSay("ls /nonexistent-corral", "it is not there")},
		{name: "write", write: true},
		{name: "ask", script: fakemodel.RunCommandThenSay("echo hello > made.txt", "done"),
			policy: &sandbox.Policy{Default: sandbox.Allow, Commands: sandbox.CommandRules{Ask: []string{"echo *"}}}},
		{name: "approved", script: fakemodel.RunCommandThenSay("echo hello > made.txt", "done"),
			policy:    &sandbox.Policy{Default: sandbox.Allow, Commands: sandbox.CommandRules{Ask: []string{"echo *"}}},
			approvals: map[string]bool{"opencode:command:echo hello > made.txt": true}},
		{name: "denied", script: fakemodel.RunCommandThenSay("rm README.md", "not allowed"),
			policy: &sandbox.Policy{Default: sandbox.Allow, Commands: sandbox.CommandRules{Deny: []string{"rm *"}}}},
		{name: "edit-asked", write: true, policy: &sandbox.Policy{Default: sandbox.Allow, FileWrite: sandbox.Ask}},
		{name: "api-error", script: fakemodel.Script{Turns: []fakemodel.Turn{{Error: &fakemodel.APIError{Status: 400, Type: "invalid_request_error", Message: "The model fake-model does not exist"}}}}},
		{name: "interrupted", script: fakemodel.RunCommandThenSay("sleep 30", "done"), kill: `"type":"step_start"`},
		{name: "resume", script: fakemodel.Script{Turns: []fakemodel.Turn{{Text: "first"}, {Text: "second"}}}, resume: true},
	}
	for _, c := range slices.Clone(cases) {
		if c.name == "interrupted" {
			c.kill = `"status":"running"`
		}
		c.server = true
		c.name = "server-" + c.name
		cases = append(cases, c)
	}
	if *captureOnly != "" {
		cases = slices.DeleteFunc(cases, func(c captureCase) bool { return !strings.Contains(c.name, *captureOnly) })
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, h := harnesstest.CaptureSandbox(t)
			ws := h.ID()
			if c.write {
				in, _ := json.Marshal(map[string]string{"filePath": filepath.Join(ws, "notes.txt"), "content": "some notes\n"})
				c.script = fakemodel.Script{Turns: []fakemodel.Turn{{Tool: &fakemodel.ToolCall{Name: "write", Input: in}}, {Text: "wrote it"}}}
			}
			srv := fakemodel.New(t, c.script)
			secrets, _ := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": canaryKey})
			policy := c.policy
			if policy == nil {
				policy = allowAll
			}
			req := harness.Request{Run: harness.Run{RunID: "capture"}, Prompt: "do it", Model: fakemodel.ModelID, Secrets: secrets, Policy: policy,
				Env: xdgEnv(t), RunDir: filepath.Join(t.TempDir(), "run.d"), WorkspaceRoot: ws,
				Options: map[string]string{opencode.OptExecutable: bin, opencode.OptBaseURL: srv.OpenAIURL()}, Approvals: c.approvals}
			if c.server {
				req.Options[opencode.OptMode] = opencode.ModeServer
			}
			if c.resume {
				out := harnesstest.Capture(t, ctx, opencode.Harness{}, h, req, "", 0)
				req.Session = sessionID(t, out)
				req.RunDir += "2"
				req.Prompt = "again"
			}
			out := harnesstest.Capture(t, ctx, opencode.Harness{}, h, req, c.kill, 2*time.Second)
			harnesstest.WriteFixture(t, h, "real-"+c.name+".jsonl", out)
		})
	}
}

func sessionID(t *testing.T, out []byte) string {
	t.Helper()
	for _, l := range bytes.Split(out, []byte("\n")) {
		var v struct {
			SessionID  string `json:"sessionID"`
			Properties struct {
				SessionID string `json:"sessionID"`
			} `json:"properties"`
		}
		if json.Unmarshal(l, &v) == nil && v.SessionID != "" {
			return v.SessionID
		}
		if json.Unmarshal(l, &v) == nil && v.Properties.SessionID != "" {
			return v.Properties.SessionID
		}
	}
	t.Fatal("no sessionID")
	return ""
}
