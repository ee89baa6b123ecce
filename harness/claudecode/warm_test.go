package claudecode_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/internal/turntest"
	"github.com/d10ffeed/corral/run"
)

// newWarmEnv is the warm-session tests' world (turntest.Env) with the
// real CLI against the fake model running script.
func newWarmEnv(t testing.TB, script fakemodel.Script) *turntest.Env {
	t.Helper()
	bin := testutil.AgentBin(t, "claude")
	srv := fakemodel.New(t, script)
	w := turntest.NewEnv(t, claudecode.Harness{}, claudecode.WarmDirPrefix, map[string]string{claudecode.APIKeySecret: "sk-ant-fake-key"})
	w.Model, w.Env = "claude-sonnet-4-5", quietEnv(t)
	w.Options = map[string]string{"executable": bin, "baseURL": srv.URL, "isSandbox": "true", claudecode.OptWarm: "true"}
	return w
}

// turnText follows a run to its end and returns its text, session and
// whether the session failed to resume.
func turnText(t *testing.T, ctx context.Context, r *run.Runner, id string) (text, session string, resumeFailed bool) {
	t.Helper()
	evs := follow(t, r, ctx, id)
	for _, e := range evs {
		resumeFailed = resumeFailed || e.Type == event.Custom && e.Name == claudecode.ResumeFailed
	}
	return turntest.Text(evs), turntest.Session(evs), resumeFailed
}

// TestWarmSession: with option warm=true, the thread's second run is
// served by the process that ran its first (same pid), with the right
// answer in the same session; a keeper SIGKILLed between turns is replaced
// on the next turn, which resumes the session with the right answer.
func TestWarmSession(t *testing.T) {
	w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Text: "two"}, {Text: "three"}}})
	r := w.Runner(t)
	ctx := testCtx(t)

	rec := w.Start(t, ctx, r, "First?")
	text, session, _ := turnText(t, ctx, r, rec.ID)
	pid := w.KeeperPid()
	if text != "one" || session == "" || pid == 0 {
		t.Fatalf("first turn: text %q session %q keeper %d", text, session, pid)
	}
	rec = w.Start(t, ctx, r, "Second?")
	text, session2, failed := turnText(t, ctx, r, rec.ID)
	if text != "two" || session2 != session || failed || w.KeeperPid() != pid || syscall.Kill(pid, 0) != nil {
		t.Fatalf("second turn: text %q session %q (first %q) resume failed %v keeper %d (first %d)", text, session2, session, failed, w.KeeperPid(), pid)
	}

	// The keeper dies between turns: the next turn starts a new one that
	// resumes the session.
	if err := testutil.KillGroup(pid); err != nil {
		t.Fatal(err)
	}
	// Dead, not dying: a SIGKILLed keeper the next check still sees alive
	// is taken as warm, and that turn fails (seen under load).
	testutil.WaitFor(t, ctx, "the killed keeper to be gone", 20*time.Millisecond,
		func(context.Context) (bool, error) { return len(testutil.SessionProcs(pid)) == 0, nil })
	rec = w.Start(t, ctx, r, "Third?")
	text, session3, failed := turnText(t, ctx, r, rec.ID)
	pid3 := w.KeeperPid()
	if text != "three" || session3 != session || failed || pid3 == pid || pid3 == 0 {
		t.Fatalf("after the kill: text %q session %q (first %q) resume failed %v keeper %d (killed %d)", text, session3, session, failed, pid3, pid)
	}
	t.Logf("turns 1-2 on keeper %d; killed; turn 3 on keeper %d, session %s resumed", pid, pid3, session)
}

// TestWarmCancel: cancelling a warm turn mid-answer ends the run and
// leaves no process of the keeper's session behind.
func TestWarmCancel(t *testing.T) {
	w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: strings.Repeat("slow words ", 400)}}, Delay: 20 * time.Millisecond, ChunkSize: 4})
	r := w.Runner(t)
	ctx := testCtx(t)
	rec := w.Start(t, ctx, r, "Talk.")
	turntest.UntilText(ctx, r, rec.ID)
	pid := w.KeeperPid()
	if pid == 0 || len(testutil.SessionProcs(pid)) == 0 {
		t.Fatalf("no live keeper mid-turn (pid %d)", pid)
	}
	turntest.CancelLeavesNothing(t, ctx, r, rec.ID, pid)
}

// TestWarmTakeover: a warm turn whose driving runner goes away mid-answer
// is taken over by another runner on the same store and delivered once,
// on the same keeper (turntest.Env.CheckTakeover).
func TestWarmTakeover(t *testing.T) {
	answer := strings.Repeat("word ", 200)
	w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Text: answer}}, Delay: 10 * time.Millisecond, ChunkSize: 8})
	w.CheckTakeover(t, testCtx(t), answer)
}

// TestWarmPrepareSession: the keeper check that starts a keeper also looks
// for the asked-for session's transcript, in the same exec: missing, the
// keeper gets a fresh --session-id and the turn client's note says
// resume_failed; present, the keeper (replaced: its session differs) gets
// --resume and the turn no note; asked again, the same keeper serves,
// found by reading its directory on the host (no exec), and the turn
// client is given the session log's size.
func TestWarmPrepareSession(t *testing.T) {
	h := localHandle(t)
	ctx := testCtx(t)
	const sid = "0f6c1a2e-1111-4222-8333-944455556666"
	// A stand-in CLI: records its argv, then reads its stdin for ever.
	dir := t.TempDir()
	exe := filepath.Join(dir, "claude")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nprintf '%s\\n' \"$*\" >>\""+dir+"/argv\"\nexec cat >/dev/null\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	req := baseRequest(t, h)
	req.Session = sid
	req.Options = map[string]string{"executable": exe, claudecode.OptWarm: "true", "isSandbox": "true"}
	keepers := map[string]bool{}
	t.Cleanup(func() {
		for p := range keepers {
			if pid, _ := strconv.Atoi(p); pid > 0 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	// The turn client's args: dir, keeper, note, the log's size (given
	// when the check was answered by reading the keeper directory on the
	// host, not by the check's exec), "small".
	var logOff string
	prepare := func() (keeper, note string) {
		t.Helper()
		inv, err := claudecode.Harness{}.Prepare(ctx, h, req)
		if err != nil {
			t.Fatal(err)
		}
		a := inv.Command.Args
		if len(a) != 9 || a[3] != "corral-claude-turn" || a[8] != "small" {
			t.Fatalf("not a warm turn with a small prompt: %q", a)
		}
		keepers[a[5]] = true
		logOff = a[7]
		return a[5], a[6]
	}
	lastArgv := func() string {
		t.Helper()
		var b []byte
		testutil.WaitFor(t, ctx, "the stand-in CLI to record its argv", 20*time.Millisecond, func(context.Context) (bool, error) {
			b, _ = os.ReadFile(filepath.Join(dir, "argv"))
			return len(b) > 0, nil
		})
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		return lines[len(lines)-1]
	}

	k1, note := prepare()
	if logOff != "" {
		t.Errorf("a keeper started now: the log's size %q given, want the check's exec to have answered", logOff)
	}
	if argv := lastArgv(); strings.Contains(argv, "--resume") || !strings.Contains(argv, "--session-id") || strings.Contains(argv, sid) {
		t.Errorf("a missing transcript: the keeper's argv %q, want a fresh --session-id", argv)
	}
	if !strings.Contains(note, `"resume_failed"`) || !strings.Contains(note, sid) {
		t.Errorf("a missing transcript: note %q, want resume_failed naming %s", note, sid)
	}

	tdir := filepath.Join(req.Env["HOME"], ".claude", "projects", "-some-project")
	if err := os.MkdirAll(tdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tdir, sid+".jsonl"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "argv")); err != nil {
		t.Fatal(err)
	}
	k2, note := prepare()
	if argv := lastArgv(); !strings.Contains(argv, "--resume "+sid) || k2 == k1 || note != "" {
		t.Errorf("with the transcript: keeper %s (was %s), argv %q, note %q; want a new keeper resuming %s, no note", k2, k1, argv, note, sid)
	}
	if k3, note := prepare(); k3 != k2 || note != "" || logOff != "0" {
		t.Errorf("asked again: keeper %s, note %q, log size %q; want the same keeper %s, no note, found on the host with its empty log", k3, note, logOff, k2)
	}
}

// TestWarmLargePrompt: a warm next turn whose prompt is larger than a
// FIFO's buffer (written in the background by cat, not by the shell's
// own printf) reaches the keeper whole and is answered.
func TestWarmLargePrompt(t *testing.T) {
	w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Text: "two"}}})
	r := w.Runner(t)
	ctx := testCtx(t)
	rec := w.Start(t, ctx, r, "First?")
	if text, _, _ := turnText(t, ctx, r, rec.ID); text != "one" {
		t.Fatalf("first turn: %q", text)
	}
	pid := w.KeeperPid()
	big := strings.Repeat("all work and no play ", 10000) + "Second?" // 210 KB
	rec = w.Start(t, ctx, r, big)
	if text, _, _ := turnText(t, ctx, r, rec.ID); text != "two" || w.KeeperPid() != pid {
		t.Fatalf("large next turn: text %q keeper %d (first %d)", text, w.KeeperPid(), pid)
	}
}

// TestWarmDiffGate: a warm turn's diff baseline is taken beside the
// turn's start, and the keeper's tools wait for it (the PreToolUse hook on
// the diff gate), so a file the agent's first tool changes at once is in
// the turn's diff, never in its baseline. The baseline is made slow: the
// workspace's git runs a clean filter that sleeps on a.txt, hashed before
// b.txt, which the turn's first tool (Bash) overwrites at once. Without
// the hook, the command runs while git sleeps and b.txt's new content is taken
// as the starting state (the diff misses it).
func TestWarmDiffGate(t *testing.T) {
	setup := `git config filter.slow.clean 'sleep 2; cat' && printf 'a.txt filter=slow\n' >.git/info/attributes && echo a >a.txt && echo b >b.txt && echo set`
	w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{
		{Command: setup}, {Text: "ready"},
		{Command: "echo changed >b.txt"}, {Text: "done"},
	}})
	r := w.Runner(t)
	ctx := testCtx(t)
	if text, _, _ := turnText(t, ctx, r, w.Start(t, ctx, r, "Set up.").ID); text != "ready" {
		t.Fatalf("first turn: text %q", text)
	}
	pid := w.KeeperPid()
	rec := w.Start(t, ctx, r, "Change b.")
	evs := follow(t, r, ctx, rec.ID)
	if text := turntest.Text(evs); text != "done" || w.KeeperPid() != pid {
		t.Fatalf("second turn: text %q, keeper %d (first %d): not a warm turn", text, w.KeeperPid(), pid)
	}
	var final *event.FileChange
	for _, e := range evs {
		var fc event.FileChange
		if e.Type == event.Custom && e.Name == event.FileChanged && json.Unmarshal(e.Value, &fc) == nil && fc.ToolCallID == "" {
			final = &fc
		}
	}
	if final == nil {
		t.Fatalf("the second turn has no final diff; events %+v", evs)
	}
	if !slices.Contains(final.Files, "b.txt") || !strings.Contains(final.Patch, "-b") || !strings.Contains(final.Patch, "+changed") {
		t.Fatalf("the second turn's diff misses the change to b.txt (taken into the baseline?): files %v\n%s", final.Files, final.Patch)
	}
	if slices.Contains(final.Files, "a.txt") {
		t.Errorf("the diff has a.txt, which the turn did not change: %v", final.Files)
	}
	gates, _ := filepath.Glob(filepath.Join(w.Journals, claudecode.WarmDirPrefix+"*", "gate"))
	if len(gates) != 0 {
		t.Errorf("a gate is left after the turn: %v", gates)
	}
}
