package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
)

// claudeScript is what the fake model plays in the Claude crash test: one
// shell command, then a long answer streamed slowly, so that there is a
// "mid-run" to kill the driver in.
func claudeScript() fakemodel.Script {
	return crashScript(fakemodel.Turn{Thinking: "Make the file first.", Command: "echo hello > made.txt"}, fakemodel.Turn{Text: crashAnswer()})
}

// crashAnswer is the crash tests' long answer: 40 numbered lines, the
// last "Line 40 of the answer.".
func crashAnswer() string {
	var answer strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&answer, "Line %02d of the answer.\n", i)
	}
	return answer.String()
}

// crashScript plays turns slowly (12 bytes every 25 ms), so that a long
// answer has a middle to kill the driver in.
func crashScript(turns ...fakemodel.Turn) fakemodel.Script {
	return fakemodel.Script{Turns: turns, Delay: 25 * time.Millisecond, ChunkSize: 12}
}

// TestClaudeCrashTakeover runs the real Claude Code CLI (against the fake
// model) under "corral run --harness claude-code", SIGKILLs the driving
// process mid-run, takes the run over with "corral attach RUN --from 0",
// and checks that the event log equals that of an uninterrupted run of the
// same script: the same events with the same ids, nothing repeated,
// nothing lost.
func TestClaudeCrashTakeover(t *testing.T) {
	bin := testutil.AgentBin(t, "claude")
	if !harnessRegistered(t, "claude-code") {
		t.Skip("this corral has no claude-code harness registered (cmd/corral/harnesses.go)")
	}
	srv := fakemodel.New(t, claudeScript())
	cfg, env := claudeCrashConfig(t)
	opts := []string{"--harness", "claude-code", "--model", "claude-sonnet-4-5", "--auth", "api-key",
		"--option", "executable=" + bin, "--option", "baseURL=" + srv.URL}

	want := normalizedLog(t, cfg, env, claudeRun(t, cfg, env, "clean", opts, nil))
	for _, kill := range []struct {
		name string
		at   func(stdout string, stderr []string) bool
	}{
		{"during the tool call", func(_ string, stderr []string) bool { return containsLine(stderr, "corral: tool Bash") }},
		{"early in the answer", func(stdout string, _ []string) bool { return strings.Contains(stdout, "Line 02") }},
		{"late in the answer", func(stdout string, _ []string) bool { return strings.Contains(stdout, "Line 33") }},
	} {
		t.Run(kill.name, func(t *testing.T) {
			id := claudeRun(t, cfg, env, "crash-"+strings.ReplaceAll(kill.name, " ", "-"), opts, kill.at)
			sameLog(t, normalizedLog(t, cfg, env, id), want)
		})
	}
}

// harnessRegistered reports whether "corral run --harness" lists name.
func harnessRegistered(t *testing.T, name string) bool {
	t.Helper()
	out, _, _ := corral(t, "run", "--help")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "--harness string") {
			return strings.Contains(line, name)
		}
	}
	return false
}

func containsLine(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// claudeCrashConfig writes a corral.yaml for the local provider with a git
// workspace, the API key as a secret and a policy (so the CLI runs with
// corral's permission tool, never in bypass mode), and returns it with
// the environment the corral processes run with.
func claudeCrashConfig(t *testing.T) (string, []string) {
	t.Helper()
	return claudeConfigWith(t, "policy:\n  commands: {allow: [\"echo *\"], deny: [\"rm *\"]}\n  default: deny\n")
}

// claudeConfigWith is claudeCrashConfig with the given policy section
// ("" for none).
func claudeConfigWith(t *testing.T, policy string) (string, []string) {
	t.Helper()
	return agentCrashConfig(t, "ANTHROPIC_API_KEY", policy)
}

// crashKey is the fake API key the crash tests' workspaces hold; it must
// never reach an event log.
const crashKey = "sk-ant-fake-crash-key"

// agentCrashConfig writes a corral.yaml for the local provider with a git
// workspace, crashKey as the workspace secret named secret and the given
// policy section ("" for none), and returns it with the environment the
// corral processes run with (a fresh HOME and state directory).
func agentCrashConfig(t *testing.T, secret, policy string) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	repo := testutil.BareRepo(t, map[string]string{"README.md": "crash test\n"})
	yaml := fmt.Sprintf(`id: claude-crash
provider:
  name: local
  local: {baseDir: %s}
workspace:
  source: {git: %q}
  secrets:
    %s: {env: CORRAL_TEST_AGENT_KEY}
%s`, filepath.Join(dir, "sandboxes"), repo, secret, policy)
	p := filepath.Join(dir, "corral.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"CORRAL_LEASE_TTL=1s", "XDG_STATE_HOME="+dir, "HOME="+home,
		"CORRAL_TEST_AGENT_KEY="+crashKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1")
	return p, env
}

// claudeRun starts a run in a fresh thread and returns its id. Without
// killAt it streams the run to its end; with it, it SIGKILLs "corral run"
// once killAt says so and takes the run over with "corral attach --from 0",
// which must end with exit code 0.
func claudeRun(t *testing.T, cfg string, env []string, thread string, opts []string, killAt func(stdout string, stderr []string) bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	common := []string{"--config", cfg}
	t.Cleanup(func() {
		down := exec.Command(corralBin, append([]string{"down", "--thread", thread}, common...)...)
		down.Env = env
		_ = down.Run()
	})
	args := append(append(append([]string{"run", "--thread", thread}, common...), opts...), "Make made.txt, then explain.")
	a := exec.CommandContext(ctx, corralBin, args...)
	a.Env = env
	stdoutPipe, err := a.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderrPipe, err := a.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	type progress struct {
		stdout string
		stderr []string
	}
	updates := make(chan progress, 1024)
	runID := make(chan string, 1)
	var (
		stdout strings.Builder
		stderr []string
		done   = make(chan struct{}, 2)
	)
	go func() {
		defer func() { done <- struct{}{} }()
		sc := bufio.NewScanner(stderrPipe)
		for sc.Scan() {
			line := sc.Text()
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "corral:" && f[1] == "run" {
				runID <- f[2]
			}
			updates <- progress{stderr: []string{line}}
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 256)
		for {
			n, err := stdoutPipe.Read(buf)
			if n > 0 {
				updates <- progress{stdout: string(buf[:n])}
			}
			if err != nil {
				return
			}
		}
	}()
	killed := false
	for finished := 0; finished < 2; {
		select {
		case u := <-updates:
			stdout.WriteString(u.stdout)
			stderr = append(stderr, u.stderr...)
			if killAt != nil && !killed && killAt(stdout.String(), stderr) {
				if err := a.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		case <-done:
			finished++
		case <-ctx.Done():
			t.Fatal("the run did not end")
		}
	}
	for len(updates) > 0 {
		u := <-updates
		stdout.WriteString(u.stdout)
		stderr = append(stderr, u.stderr...)
	}
	err = a.Wait()
	var id string
	select {
	case id = <-runID:
	default:
		t.Fatalf("no run id; stderr:\n%s", strings.Join(stderr, "\n"))
	}
	if killAt == nil {
		if err != nil {
			t.Fatalf("the uninterrupted run failed: %v\nstderr:\n%s", err, strings.Join(stderr, "\n"))
		}
		return id
	}
	if !killed {
		t.Fatalf("the run ended before the kill point (err %v); stdout %q", err, stdout.String())
	}
	b := exec.CommandContext(ctx, corralBin, append(append([]string{"attach", id}, common...), "--from", "0")...)
	b.Env = env
	out, err := b.CombinedOutput()
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Line 40 of the answer.") {
		t.Errorf("attach --from 0 did not print the whole answer:\n%s", out)
	}
	return id
}

// normalizedLog reads a run's event log and returns each event as JSON
// with the run's own identifiers (run, thread and agent session ids, all
// of which differ between runs) replaced by placeholders. It fails on a
// gap or a repeat in the sequence numbers.
func normalizedLog(t *testing.T, cfg string, env []string, id string) []string {
	t.Helper()
	logs := exec.Command(corralBin, "logs", id, "--json", "--config", cfg)
	logs.Env = env
	raw, err := logs.Output()
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	var (
		out             []string
		thread, session string
	)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	for i, line := range lines {
		seq, js, _ := strings.Cut(line, " ")
		if seq != fmt.Sprint(i+1) {
			t.Fatalf("event %d has sequence number %s", i+1, seq)
		}
		var ev event.Event
		if err := json.Unmarshal([]byte(js), &ev); err != nil {
			t.Fatalf("bad event %q: %v", line, err)
		}
		if ev.Type == event.RunStarted {
			thread = ev.ThreadID
		}
		if ev.Type == event.Custom && ev.Name == event.SessionStarted {
			var s event.Session
			_ = json.Unmarshal(ev.Value, &s)
			session = s.ID
		}
		if strings.Contains(js, crashKey) {
			t.Errorf("the API key is in the event log: %s", js)
		}
		out = append(out, js)
	}
	if thread == "" || session == "" {
		t.Fatalf("no RUN_STARTED or session.started in the log:\n%s", raw)
	}
	for i := range out {
		out[i] = strings.NewReplacer(id, "RUN", thread, "THREAD", session, "SESSION").Replace(out[i])
	}
	if last, _ := event.Unmarshal([]byte(out[len(out)-1])); last.Type != event.RunFinished {
		t.Errorf("the run ended with %s", out[len(out)-1])
	}
	return out
}

// TestClaudeWarmCrashTakeover is TestClaudeCrashTakeover for a warm
// session (--option warm=true; no policy, so the turn can run warm): see
// warmCrashTakeover.
func TestClaudeWarmCrashTakeover(t *testing.T) {
	bin := testutil.AgentBin(t, "claude")
	if !harnessRegistered(t, "claude-code") {
		t.Skip("this corral has no claude-code harness registered (cmd/corral/harnesses.go)")
	}
	srv := fakemodel.New(t, warmCrashScript())
	cfg, env := claudeConfigWith(t, "")
	warmCrashTakeover(t, cfg, env, claudecode.WarmDirPrefix, "--harness", "claude-code", "--model", "claude-sonnet-4-5", "--auth", "api-key",
		"--option", "executable="+bin, "--option", "baseURL="+srv.URL, "--option", "warm=true", "--option", "isSandbox=true")
}

// warmCrashScript is what the fake model plays in the warm crash tests: a
// short first turn (it starts the kept process), then the same long
// answer twice, streamed slowly, so that the third turn has a
// "mid-answer" to kill the driver in and the second is what it must
// equal.
func warmCrashScript() fakemodel.Script {
	return crashScript(fakemodel.Turn{Text: "Ready."}, fakemodel.Turn{Text: crashAnswer()}, fakemodel.Turn{Text: crashAnswer()})
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

// sameLog fails unless a taken-over run's normalized log equals that of
// the uninterrupted run, event for event.
func sameLog(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("the log holds %d events, an uninterrupted run %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d differs:\n got %s\nwant %s", i+1, got[i], want[i])
		}
	}
}
