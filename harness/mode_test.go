package harness_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/harness/grokbuild"
	"github.com/d10ffeed/corral/harness/opencode"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/sandbox"
)

// TestModePerHarness: a run's mode is taken by the harnesses whose agent
// has modes and refused, InvalidArgument naming the harness, by the
// others; a mode the harness does not have is refused too.
func TestModePerHarness(t *testing.T) {
	for _, c := range []struct {
		h    harness.Harness
		mode string
		ok   bool
	}{
		{claudecode.Harness{}, "plan", true},
		{claudecode.Harness{}, "acceptEdits", true},
		{claudecode.Harness{}, "yolo", false},
		{opencode.Harness{}, "plan", true},
		{opencode.Harness{}, "build", true},
		{opencode.Harness{}, "no spaces", false},
		{acp.New(acp.Options{}), "architect", true},
		{acp.New(acp.Options{}), "two\nlines", false},
		{codex.Harness{}, "plan", false},
		{grokbuild.Harness{}, "plan", false},
		{command.Harness{}, "plan", false},
		{command.Harness{}, "", true},
	} {
		t.Run(c.h.Name()+"/"+c.mode, func(t *testing.T) {
			err := harness.CheckMode(c.h, c.mode)
			if c.ok != (err == nil) {
				t.Fatalf("CheckMode(%q): %v, want ok %v", c.mode, err, c.ok)
			}
			if err != nil && (sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), c.h.Name())) {
				t.Errorf("error %v: want InvalidArgument naming %s", err, c.h.Name())
			}
		})
	}
}

// TestModelAndModeReachTheAgent: each harness's invocation (argv, or the
// server-mode client's configuration) carries the run's model and mode.
func TestModelAndModeReachTheAgent(t *testing.T) {
	secrets, err := sandbox.NewSecrets(map[string]string{claudecode.APIKeySecret: "sk-ant-test", "OPENAI_API_KEY": "sk-test", "XAI_API_KEY": "xai-test"})
	if err != nil {
		t.Fatal(err)
	}
	policy := &sandbox.Policy{Default: sandbox.Allow}
	for _, c := range []struct {
		name, model, mode string
		h                 harness.Harness
		opts              map[string]string
		check             func(t *testing.T, argv []string, files map[string]string)
	}{
		{"claude-code", "claude-sonnet-4-5", "plan", claudecode.Harness{}, map[string]string{"baseURL": "http://127.0.0.1:1"}, func(t *testing.T, argv []string, _ map[string]string) {
			if flagAfter(argv, "--model") != "claude-sonnet-4-5" || flagAfter(argv, "--permission-mode") != "plan" {
				t.Errorf("argv %q: want --model claude-sonnet-4-5 and --permission-mode plan", argv)
			}
		}},
		{"codex", "gpt-5-codex", "", codex.Harness{}, map[string]string{codex.OptSessionsDir: t.TempDir(), codex.OptHome: "run"}, func(t *testing.T, argv []string, _ map[string]string) {
			if flagAfter(argv, "-m") != "gpt-5-codex" {
				t.Errorf("argv %q: want -m gpt-5-codex", argv)
			}
		}},
		{"opencode", "anthropic/claude-sonnet-4-5", "plan", opencode.Harness{}, nil, func(t *testing.T, argv []string, _ map[string]string) {
			if flagAfter(argv, "-m") != "anthropic/claude-sonnet-4-5" || flagAfter(argv, "--agent") != "plan" {
				t.Errorf("argv %q: want -m anthropic/claude-sonnet-4-5 and --agent plan", argv)
			}
		}},
		{"opencode server", "anthropic/claude-sonnet-4-5", "plan", opencode.Harness{}, map[string]string{opencode.OptMode: opencode.ModeServer}, func(t *testing.T, _ []string, files map[string]string) {
			var cfg struct {
				Agent string `json:"agent"`
				Model struct{ ProviderID, ModelID string }
			}
			if err := json.Unmarshal([]byte(files["serve.json"]), &cfg); err != nil || cfg.Agent != "plan" || cfg.Model.ProviderID != "anthropic" || cfg.Model.ModelID != "claude-sonnet-4-5" {
				t.Errorf("serve.json %s (%v): want agent plan, model anthropic/claude-sonnet-4-5", files["serve.json"], err)
			}
		}},
		{"grok", "grok-code-fast-1", "", grokbuild.Harness{}, nil, func(t *testing.T, argv []string, _ map[string]string) {
			if flagAfter(argv, "-m") != "grok-code-fast-1" {
				t.Errorf("argv %q: want -m grok-code-fast-1", argv)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			hd := testutil.LocalSandbox(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			runDir := filepath.Join(t.TempDir(), "run.d")
			inv, err := c.h.Prepare(ctx, hd, harness.Request{Run: harness.Run{RunID: "run-1", ThreadID: "t"}, Prompt: "p", Secrets: secrets, Policy: policy,
				Model: c.model, Mode: c.mode, Options: c.opts, WorkspaceRoot: hd.WorkspaceRoot(), RunDir: runDir, Env: map[string]string{"HOME": t.TempDir()}})
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, inv.Command.Args, readTree(t, runDir))
			t.Logf("%s: model %q mode %q → argv %q", c.name, c.model, c.mode, inv.Command.Args)
		})
	}
}
