package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
)

// TestClaudeApproveInNextRun is the issue's reproduction: `corral run
// --thread T --approve ID` answering a Claude Code approval once ended in
// RUN_ERROR "unknown option approvals". The first run prints the approval
// it needs; the thread's next run with --approve makes the file, with
// --deny it does not, and neither asks again.
func TestClaudeApproveInNextRun(t *testing.T) {
	bin := testutil.AgentBin(t, "claude")
	if !harnessRegistered(t, "claude-code") {
		t.Skip("this corral has no claude-code harness registered (cmd/corral/harnesses.go)")
	}
	const cmd = "touch approved.txt"
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{{Command: cmd}, {Text: "it needs approval"}, {Command: cmd}, {Text: "done"}}})
	dir := t.TempDir()
	repo := testutil.BareRepo(t, map[string]string{"README.md": "approve test\n"})
	// config writes a corral.yaml whose sandboxes live in base.
	config := func(base string) string {
		t.Helper()
		cfg := filepath.Join(t.TempDir(), "corral.yaml")
		yaml := fmt.Sprintf(`id: claude-approve
provider:
  name: local
  local: {baseDir: %s}
workspace:
  source: {git: %q}
  secrets:
    ANTHROPIC_API_KEY: {env: CORRAL_TEST_ANTHROPIC_KEY}
policy:
  commands: {ask: ["touch *"]}
  default: allow
`, base, repo)
		if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "XDG_STATE_HOME="+dir, "HOME="+home, "CORRAL_TEST_ANTHROPIC_KEY=sk-ant-fake-approve-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1")
	id := "claude-code:command:" + cmd
	corralRun := func(cfg, thread string, extra ...string) (string, string, int) {
		t.Helper()
		args := append([]string{"run", "--config", cfg, "--thread", thread, "--harness", "claude-code", "--auth", "api-key",
			"--option", "executable=" + bin, "--option", "baseURL=" + srv.URL}, extra...)
		c := exec.Command(corralBin, args...)
		c.Env = env
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	for _, answer := range []string{"--approve", "--deny"} {
		t.Run(answer, func(t *testing.T) {
			thread, base := "t"+answer, t.TempDir()
			cfg := config(base)
			t.Cleanup(func() {
				down := exec.Command(corralBin, "down", "--config", cfg, "--thread", thread)
				down.Env = env
				_ = down.Run()
			})
			_, errOut, code := corralRun(cfg, thread, "make approved.txt")
			if code != 0 || !strings.Contains(errOut, "approval needed") || !strings.Contains(errOut, "--approve '"+id+"'") {
				t.Fatalf("first run: exit %d, stderr:\n%s", code, errOut)
			}
			_, errOut2, code2 := corralRun(cfg, thread, answer, id, "go on")
			made, _ := filepath.Glob(filepath.Join(base, "*", "approved.txt"))
			asked := strings.Contains(errOut2, "approval needed")
			if code2 != 0 || asked || strings.Contains(errOut2, "unknown option") || (len(made) == 1) != (answer == "--approve") {
				t.Errorf("corral run --thread %s %s %s: exit %d, files %q, stderr:\n%s", thread, answer, id, code2, made, errOut2)
			}
			t.Logf("corral run %s %s: exit %d, asked again %v, approved.txt made %v", answer, id, code2, asked, len(made) == 1)
		})
	}
}
