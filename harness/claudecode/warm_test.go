package claudecode_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/internal/turntest"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// warmEnv is a runner pair's world for warm-session tests: one store, one
// journal directory (where the keeper directories live), a local provider.
type warmEnv struct {
	st       store.Store
	def      *sandbox.Definition
	journals string
	opts     map[string]string
	env      map[string]string
}

func newWarmEnv(t testing.TB, script fakemodel.Script) *warmEnv {
	t.Helper()
	bin := testutil.AgentBin(t, "claude")
	srv := fakemodel.New(t, script)
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	secrets, _ := sandbox.NewSecrets(map[string]string{claudecode.APIKeySecret: "sk-ant-fake-key"})
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	w := &warmEnv{
		st: st, journals: t.TempDir(), env: quietEnv(t),
		def: &sandbox.Definition{ID: "claude", Provider: p,
			Workspace: &sandbox.Workspace{Source: &sandbox.Source{Git: testutil.BareRepo(t, map[string]string{"README.md": "hi\n"})}, Secrets: secrets}},
		opts: map[string]string{"executable": bin, "baseURL": srv.URL, "isSandbox": "true", claudecode.OptWarm: "true"},
	}
	t.Cleanup(func() {
		if t.Failed() {
			testutil.LogFiles(t, nil, filepath.Join(w.journals, "*", "*"), filepath.Join(w.journals, "*"))
		}
		w.killKeepers(t)
	})
	return w
}

func (w *warmEnv) runner(t testing.TB) *run.Runner {
	t.Helper()
	r, err := run.New(w.st, []*sandbox.Definition{w.def}, []harness.Harness{claudecode.Harness{}}, run.Options{
		PollInterval: 50 * time.Millisecond, JournalDir: w.journals, LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func (w *warmEnv) start(t testing.TB, ctx context.Context, r *run.Runner, prompt string) store.Run {
	t.Helper()
	return w.startIn(t, ctx, r, "th", prompt)
}

// startIn starts a turn in the given thread.
func (w *warmEnv) startIn(t testing.TB, ctx context.Context, r *run.Runner, thread, prompt string) store.Run {
	t.Helper()
	rec, err := r.Start(ctx, run.StartRequest{Definition: "claude", Thread: thread, Harness: claudecode.Name, Prompt: prompt, Model: "claude-sonnet-4-5", Env: w.env, Options: w.opts})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// keeperPid is the pid the thread's keeper directory records (0: none).
func (w *warmEnv) keeperPid(t testing.TB) int {
	t.Helper()
	return testutil.PidFile(filepath.Join(w.journals, claudecode.WarmDirPrefix+"*", "pid"))
}

// killKeepers kills the keeper of every thread (their whole sessions).
func (w *warmEnv) killKeepers(t testing.TB) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(w.journals, claudecode.WarmDirPrefix+"*", "pid"))
	for _, f := range files {
		if pid := testutil.PidFile(f); pid > 0 {
			_ = testutil.KillGroup(pid)
		}
	}
}

// turnText follows a run to its end and returns its text, session and
// whether the session failed to resume.
func turnText(t *testing.T, ctx context.Context, r *run.Runner, id string) (text, session string, resumeFailed bool) {
	t.Helper()
	for _, e := range follow(t, r, ctx, id) {
		switch {
		case e.Type == event.TextMessageContent:
			text += e.Delta
		case e.Type == event.Custom && e.Name == event.SessionStarted:
			var s event.Session
			_ = json.Unmarshal(e.Value, &s)
			session = s.ID
		case e.Type == event.Custom && e.Name == claudecode.ResumeFailed:
			resumeFailed = true
		}
	}
	return text, session, resumeFailed
}

// TestWarmSession: with option warm=true, the thread's second run is
// served by the process that ran its first (same pid), with the right
// answer in the same session; a keeper SIGKILLed between turns is replaced
// on the next turn, which resumes the session with the right answer.
func TestWarmSession(t *testing.T) {
	w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Text: "two"}, {Text: "three"}}})
	r := w.runner(t)
	ctx := testCtx(t)

	rec := w.start(t, ctx, r, "First?")
	text, session, _ := turnText(t, ctx, r, rec.ID)
	pid := w.keeperPid(t)
	if text != "one" || session == "" || pid == 0 {
		t.Fatalf("first turn: text %q session %q keeper %d", text, session, pid)
	}
	rec = w.start(t, ctx, r, "Second?")
	text, session2, failed := turnText(t, ctx, r, rec.ID)
	if text != "two" || session2 != session || failed || w.keeperPid(t) != pid || syscall.Kill(pid, 0) != nil {
		t.Fatalf("second turn: text %q session %q (first %q) resume failed %v keeper %d (first %d)", text, session2, session, failed, w.keeperPid(t), pid)
	}

	// The keeper dies between turns: the next turn starts a new one that
	// resumes the session.
	if err := testutil.KillGroup(pid); err != nil {
		t.Fatal(err)
	}
	rec = w.start(t, ctx, r, "Third?")
	text, session3, failed := turnText(t, ctx, r, rec.ID)
	pid3 := w.keeperPid(t)
	if text != "three" || session3 != session || failed || pid3 == pid || pid3 == 0 {
		t.Fatalf("after the kill: text %q session %q (first %q) resume failed %v keeper %d (killed %d)", text, session3, session, failed, pid3, pid)
	}
	t.Logf("turns 1-2 on keeper %d; killed; turn 3 on keeper %d, session %s resumed", pid, pid3, session)
}

// TestWarmCancel: cancelling a warm turn mid-answer ends the run and
// leaves no process of the keeper's session behind.
func TestWarmCancel(t *testing.T) {
	w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: strings.Repeat("slow words ", 400)}}, Delay: 20 * time.Millisecond, ChunkSize: 4})
	r := w.runner(t)
	ctx := testCtx(t)
	rec := w.start(t, ctx, r, "Talk.")
	turntest.UntilText(ctx, r, rec.ID)
	pid := w.keeperPid(t)
	if pid == 0 || len(testutil.SessionProcs(pid)) == 0 {
		t.Fatalf("no live keeper mid-turn (pid %d)", pid)
	}
	turntest.CancelLeavesNothing(t, ctx, r, rec.ID, pid)
}

// TestWarmTakeover: a warm turn whose driving runner goes away mid-answer
// (it closes, dropping its driver and lease, as the takeover tests do) is
// taken over by another runner on the same store and delivered once: every
// stored event delivered in order, one RUN_FINISHED, the whole answer.
func TestWarmTakeover(t *testing.T) {
	answer := strings.Repeat("word ", 200)
	w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Text: answer}}, Delay: 10 * time.Millisecond, ChunkSize: 8})
	a, b := w.runner(t), w.runner(t)
	ctx := testCtx(t)
	rec := w.start(t, ctx, a, "First?")
	if text, _, _ := turnText(t, ctx, a, rec.ID); text != "one" {
		t.Fatalf("first turn: %q", text)
	}
	pid := w.keeperPid(t)
	rec = w.start(t, ctx, a, "Second?")
	turntest.UntilText(ctx, a, rec.ID)
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	if err := b.Attach(ctx, rec.ID, 0, func(e store.Event) error { seqs = append(seqs, e.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	stored, err := w.st.ReadEvents(ctx, rec.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var text string
	finished := 0
	for i, e := range stored {
		if e.Seq != int64(i+1) || i >= len(seqs) || seqs[i] != e.Seq {
			t.Fatalf("event %d has seq %d (delivered %v)", i+1, e.Seq, seqs)
		}
		ev, _ := event.Unmarshal(e.Data)
		if ev.Type == event.TextMessageContent {
			text += ev.Delta
		}
		if ev.Type == event.RunFinished {
			finished++
		}
	}
	final, _, _ := w.st.GetRun(ctx, rec.ID)
	if final.Status != store.RunCompleted || final.DriverEpoch < 2 || len(seqs) != len(stored) || finished != 1 || text != answer || w.keeperPid(t) != pid {
		t.Errorf("status %s epoch %d, delivered %d of %d, %d RUN_FINISHED, text %d bytes (want %d), keeper %d (was %d)",
			final.Status, final.DriverEpoch, len(seqs), len(stored), finished, len(text), len(answer), w.keeperPid(t), pid)
	}
}

// TestWarmPrepareSession: the keeper check that starts a keeper also looks
// for the asked-for session's transcript, in the same exec: missing, the
// keeper gets a fresh --session-id and the turn client's note says
// resume_failed; present, the keeper (replaced: its session differs) gets
// --resume and the turn no note; asked again, the same keeper serves.
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
	prepare := func() (keeper, note string) {
		t.Helper()
		inv, err := claudecode.Harness{}.Prepare(ctx, h, req)
		if err != nil {
			t.Fatal(err)
		}
		a := inv.Command.Args
		if len(a) != 7 || a[3] != "corral-claude-turn" {
			t.Fatalf("not a warm turn: %q", a)
		}
		keepers[a[5]] = true
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
	if k3, note := prepare(); k3 != k2 || note != "" {
		t.Errorf("asked again: keeper %s, note %q; want the same keeper %s, no note", k3, note, k2)
	}
}
