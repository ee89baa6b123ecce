package codex_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/harness/harnesstest"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/turntest"
	"github.com/d10ffeed/corral/sandbox"
)

// TestCaptureWarmFixtures records the app-* fixtures: what the warm turn
// client relays from the real `codex app-server` (its JSON-RPC
// notifications), prepared by the harness with warm=true, against
// fakemodel scripts. Workspace paths are rewritten to /workspace. Run with
// -capture, then -update.
func TestCaptureWarmFixtures(t *testing.T) {
	bin := captureBin(t, "app-*")
	cases := append(commonCaptures(),
		captureCase{name: "interrupted", script: fakemodel.RunCommandThenSay("sleep 30", "done"), kill: `"method":"item/started","params":{"item":{"type":"commandExecution"`})
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
