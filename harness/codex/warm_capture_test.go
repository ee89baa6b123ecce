package codex_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/harness/harnesstest"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/internal/turntest"
	"github.com/d10ffeed/corral/sandbox"
)

// TestCaptureWarmFixtures records the app-* fixtures: what the warm turn
// client relays from the real `codex app-server` (its JSON-RPC
// notifications), prepared by the harness with warm=true, against
// fakemodel scripts. Workspace paths are rewritten to /workspace. Run with
// -capture, then -update.
func TestCaptureWarmFixtures(t *testing.T) {
	if !*capture {
		t.Skip("run with -capture to record the app-* fixtures")
	}
	bin := testutil.AgentBin(t, "codex")
	apply := "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\nEOF\n"
	cases := []struct {
		name   string
		script fakemodel.Script
		kill   string
	}{
		{name: "text", script: fakemodel.Say("Hello from the fake model.")},
		{name: "reasoning", script: fakemodel.ThinkThenSay("Let me think about it.", "Thought it through.")},
		{name: "command", script: fakemodel.RunCommandThenSay("echo hello > made.txt", "done")},
		{name: "command-failed", script: fakemodel.RunCommandThenSay("ls /nonexistent-corral", "it is not there")},
		{name: "file-change", script: fakemodel.Script{Turns: []fakemodel.Turn{
			{Tool: &fakemodel.ToolCall{Name: "exec_command", Input: mustJSON(map[string]string{"cmd": apply})}}, {Text: "patched"}}}},
		{name: "turn-failed", script: fakemodel.Script{Turns: []fakemodel.Turn{{Error: &fakemodel.APIError{Status: 400, Type: "invalid_request_error", Message: "The model fake-model does not exist"}}}}},
		{name: "interrupted", script: fakemodel.RunCommandThenSay("sleep 30", "done"), kill: `"method":"item/started","params":{"item":{"type":"commandExecution"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := fakemodel.New(t, c.script)
			ctx, h := harnesstest.CaptureSandbox(t)
			secrets, _ := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": canaryKey})
			journals := t.TempDir()
			t.Cleanup(func() { turntest.KillKeepers(journals, codex.WarmDirPrefix) })
			req := harness.Request{Run: harness.Run{RunID: "capture", ThreadID: "t-" + c.name}, Prompt: "do it", Model: fakemodel.ModelID, Secrets: secrets,
				RunDir:  filepath.Join(journals, "run.d"),
				Options: map[string]string{codex.OptExecutable: bin, codex.OptBaseURL: srv.OpenAIURL(), codex.OptSessionsDir: t.TempDir(), codex.OptWarm: "true"}}
			out := harnesstest.Capture(t, ctx, codex.Harness{}, h, req, c.kill, 300*time.Millisecond)
			harnesstest.WriteFixture(t, h, "app-"+c.name+".jsonl", out)
		})
	}
}
