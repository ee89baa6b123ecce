package main

import (
	"testing"

	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/harness/opencode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
)

// TestCodexWarmCrashTakeover is warmCrashTakeover for a warm Codex
// session (--option warm=true: the thread's `codex app-server`), with the
// real codex CLI against the fake model. A keeper killed between turns is
// TestRealCodexWarmSession's (harness/codex).
func TestCodexWarmCrashTakeover(t *testing.T) {
	bin := testutil.AgentBin(t, "codex")
	if !harnessRegistered(t, codex.Name) {
		t.Skip("this corral has no codex harness registered (cmd/corral/harnesses.go)")
	}
	srv := fakemodel.New(t, warmCrashScript())
	cfg, env := agentCrashConfig(t, "OPENAI_API_KEY", "")
	warmCrashTakeover(t, cfg, env, codex.WarmDirPrefix, "--harness", codex.Name, "--model", fakemodel.ModelID, "--auth", "api-key",
		"--option", codex.OptExecutable+"="+bin, "--option", codex.OptBaseURL+"="+srv.OpenAIURL(), "--option", codex.OptWarm+"=true")
}

// TestOpenCodeWarmCrashTakeover is warmCrashTakeover for a warm OpenCode
// server (--option mode=server --option warm=true: the thread's kept
// `opencode serve`), with the real opencode CLI against the fake model. A
// server killed between turns is TestRealOpenCodeWarm's
// (harness/opencode).
func TestOpenCodeWarmCrashTakeover(t *testing.T) {
	bin := testutil.AgentBin(t, "opencode")
	if !harnessRegistered(t, opencode.Name) {
		t.Skip("this corral has no opencode harness registered (cmd/corral/harnesses.go)")
	}
	srv := fakemodel.New(t, warmCrashScript())
	cfg, env := agentCrashConfig(t, opencode.DefaultAPIKeySecret, "")
	warmCrashTakeover(t, cfg, env, opencode.WarmDirPrefix, "--harness", opencode.Name, "--model", fakemodel.ModelID, "--auth", "api-key",
		"--option", opencode.OptExecutable+"="+bin, "--option", opencode.OptBaseURL+"="+srv.OpenAIURL(),
		"--option", opencode.OptMode+"="+opencode.ModeServer, "--option", opencode.OptWarm+"=true")
}
