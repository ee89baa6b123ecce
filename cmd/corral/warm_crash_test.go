package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/harness/opencode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
)

// warmCrashScript is what the fake model plays in the warm crash tests: a
// short first turn (it starts the kept process), then the same long
// answer twice, streamed slowly, so that the third turn has a
// "mid-answer" to kill the driver in and the second is what it must
// equal.
func warmCrashScript() fakemodel.Script {
	var answer strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&answer, "Line %02d of the answer.\n", i)
	}
	return fakemodel.Script{Turns: []fakemodel.Turn{{Text: "Ready."}, {Text: answer.String()}, {Text: answer.String()}},
		Delay: 25 * time.Millisecond, ChunkSize: 12}
}

// warmCrashTakeover is the warm crash-takeover test of one harness, run
// with opts (warm=true among them) on the corral.yaml cfg, whose kept
// process's directory (beside the journals) begins with prefix. A thread
// takes three turns: the first starts the kept process, the second and
// third are handed to it. "corral run" is SIGKILLed in the middle of the
// third turn's answer, and "corral attach --from 0" from another process
// must deliver the whole answer and the log of the uninterrupted second
// turn, event for event, once each (the fake model gives both turns the
// same answer; normalizedLog replaces the run's identifiers); the kept
// process must be the same in all three turns. One thread, not a clean
// one beside the crashed one as TestClaudeCrashTakeover has: a kept
// OpenCode server takes seconds to start.
func warmCrashTakeover(t *testing.T, cfg string, env []string, prefix string, opts ...string) {
	t.Helper()
	// The keeper directories are in the journal directory every local
	// sandbox shares, named by the thread: a thread of this process only.
	thread := fmt.Sprintf("warm-crash-%s%d", prefix, os.Getpid())
	sum := sha256.Sum256([]byte(thread))
	dir := filepath.Join(journal.DefaultDir, prefix+hex.EncodeToString(sum[:8]))
	// keeper is the pid of the thread's kept process.
	keeper := func() string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil {
			t.Fatalf("thread %s has no kept process: %v", thread, err)
		}
		return strings.TrimSpace(string(b))
	}
	start := time.Now()
	claudeRun(t, cfg, env, thread, opts, nil)
	first := keeper()
	t.Cleanup(func() {
		if t.Failed() {
			testutil.LogFiles(t, func(name string) bool { return filepath.Base(name) == "password" }, filepath.Join(dir, "*"))
		}
		// "corral down" (claudeRun's cleanup, after this one) kills the
		// sandbox's processes; this is the net under it.
		if pid, err := strconv.Atoi(first); err == nil && pid > 0 {
			_ = testutil.KillGroup(pid)
		}
		os.RemoveAll(dir)
	})
	t.Logf("first turn (kept process %s started): %v", first, time.Since(start))
	want := normalizedLog(t, cfg, env, claudeRun(t, cfg, env, thread, opts, nil))
	if k := keeper(); k != first {
		t.Fatalf("the second turn ran in process %s, the first in %s: not warm", k, first)
	}
	t.Logf("second turn: %v", time.Since(start))
	id := claudeRun(t, cfg, env, thread, opts, func(stdout string, _ []string) bool { return strings.Contains(stdout, "Line 05") })
	if k := keeper(); k != first {
		t.Fatalf("the killed turn ran in process %s, the first in %s: not warm", k, first)
	}
	t.Logf("third turn, killed and attached: %v", time.Since(start))
	sameLog(t, normalizedLog(t, cfg, env, id), want)
}

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
