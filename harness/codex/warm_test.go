package codex_test

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
	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// warmEnv is a runner's world for the warm-session tests: one store, one
// journal directory (where the keeper directories live), a local provider
// and the fake model.
type warmEnv struct {
	st       store.Store
	def      *sandbox.Definition
	journals string
	opts     map[string]string
}

func newWarmEnv(t testing.TB, script fakemodel.Script) *warmEnv {
	t.Helper()
	bin := testutil.AgentBin(t, "codex")
	srv := fakemodel.New(t, script)
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	secrets, _ := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": canaryKey})
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	w := &warmEnv{
		st: st, journals: t.TempDir(),
		def: &sandbox.Definition{ID: "d", Provider: p,
			Workspace: &sandbox.Workspace{Source: &sandbox.Source{Git: testutil.BareRepo(t, map[string]string{"README.md": "hi\n"})}, Secrets: secrets}},
		opts: map[string]string{codex.OptExecutable: bin, codex.OptBaseURL: srv.OpenAIURL(), codex.OptSessionsDir: t.TempDir(), codex.OptWarm: "true"},
	}
	t.Cleanup(func() {
		if t.Failed() {
			files, _ := filepath.Glob(filepath.Join(w.journals, codex.WarmDirPrefix+"*", "*"))
			for _, f := range files {
				if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
					b, _ := os.ReadFile(f)
					t.Logf("%s:\n%.3000s", f, b)
				}
			}
		}
		w.killKeepers()
		// No file of the keeper's directory or its CODEX_HOME holds the
		// key (it is only in the keeper's environment); then the home
		// kept outside /tmp (bubblewrap) is removed.
		homes, _ := filepath.Glob(filepath.Join(w.journals, codex.WarmDirPrefix+"*", "codex-home"))
		dirs := []string{w.journals}
		for _, f := range homes {
			if b, err := os.ReadFile(f); err == nil && filepath.IsAbs(strings.TrimSpace(string(b))) {
				dirs = append(dirs, strings.TrimSpace(string(b)))
			}
		}
		for _, dir := range dirs {
			_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), canaryKey) {
						t.Errorf("the API key is in %s", p)
					}
				}
				return nil
			})
		}
		for _, dir := range dirs[1:] {
			_ = os.RemoveAll(dir)
		}
	})
	return w
}

func (w *warmEnv) runner(t testing.TB) *run.Runner {
	t.Helper()
	r, err := run.New(w.st, []*sandbox.Definition{w.def}, []harness.Harness{codex.Harness{}}, run.Options{
		PollInterval: 50 * time.Millisecond, JournalDir: w.journals, LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func (w *warmEnv) start(t testing.TB, ctx context.Context, r *run.Runner, prompt string) store.Run {
	t.Helper()
	rec, err := r.Start(ctx, run.StartRequest{Definition: "d", Thread: "th", Harness: codex.Name, Prompt: prompt, Model: fakemodel.ModelID, Options: w.opts})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// keeperPid is the pid the thread's keeper directory records (0: none).
func (w *warmEnv) keeperPid() int {
	files, _ := filepath.Glob(filepath.Join(w.journals, codex.WarmDirPrefix+"*", "pid"))
	if len(files) != 1 {
		return 0
	}
	b, _ := os.ReadFile(files[0])
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func (w *warmEnv) killKeepers() {
	if pid := w.keeperPid(); pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// procsWith lists the live processes whose argv has these words in a row.
func procsWith(words ...string) []int {
	want := strings.Join(words, "\x00") + "\x00"
	var out []int
	files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b), want) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join(filepath.Dir(f), "stat")); err == nil {
			if i := strings.LastIndexByte(string(st), ')'); i > 0 && strings.HasPrefix(string(st[i+1:]), " Z") {
				continue
			}
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		out = append(out, pid)
	}
	return out
}

func warmCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// follow follows a run to its end and returns its events.
func follow(t *testing.T, ctx context.Context, r *run.Runner, id string) []event.Event {
	t.Helper()
	var evs []event.Event
	if err := r.Follow(ctx, id, 0, func(e store.Event) error {
		ev, err := event.Unmarshal(e.Data)
		if err == nil {
			evs = append(evs, ev)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

// turnText follows a run to its end and returns its text, its codex
// thread and its last event's type.
func turnText(t *testing.T, ctx context.Context, r *run.Runner, id string) (text, session string, last event.Type) {
	t.Helper()
	evs := follow(t, ctx, r, id)
	for _, e := range evs {
		if strings.Contains(string(e.Marshal()), canaryKey) {
			t.Fatalf("the API key leaked into an event: %s", e.Marshal())
		}
		switch {
		case e.Type == event.TextMessageContent:
			text += e.Delta
		case e.Type == event.Custom && e.Name == event.SessionStarted:
			var s event.Session
			_ = json.Unmarshal(e.Value, &s)
			session = s.ID
		}
	}
	if len(evs) > 0 {
		last = evs[len(evs)-1].Type
	}
	return text, session, last
}

// TestRealCodexWarmSession: with option warm=true, the thread's second run
// is served by the app-server that ran its first (same pid), with the
// right answer in the same codex thread; a keeper SIGKILLed between turns
// is replaced on the next turn, which resumes the thread (the model's
// request carries the earlier turns) with the right answer.
func TestRealCodexWarmSession(t *testing.T) {
	srv := fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Text: "two"}, {Text: "three"}}}
	w := newWarmEnv(t, srv)
	r := w.runner(t)
	ctx := warmCtx(t)

	rec := w.start(t, ctx, r, "First?")
	text, thread, last := turnText(t, ctx, r, rec.ID)
	pid := w.keeperPid()
	if text != "one" || thread == "" || pid == 0 || last != event.RunFinished {
		t.Fatalf("first turn: text %q thread %q keeper %d last %s", text, thread, pid, last)
	}
	rec = w.start(t, ctx, r, "Second?")
	text, thread2, last := turnText(t, ctx, r, rec.ID)
	if text != "two" || thread2 != thread || w.keeperPid() != pid || syscall.Kill(pid, 0) != nil || last != event.RunFinished {
		t.Fatalf("second turn: text %q thread %q (first %q) keeper %d (first %d) last %s", text, thread2, thread, w.keeperPid(), pid, last)
	}

	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	rec = w.start(t, ctx, r, "Third?")
	text, thread3, last := turnText(t, ctx, r, rec.ID)
	pid3 := w.keeperPid()
	if text != "three" || thread3 != thread || pid3 == pid || pid3 == 0 || last != event.RunFinished {
		t.Fatalf("after the kill: text %q thread %q (first %q) keeper %d (killed %d) last %s", text, thread3, thread, pid3, pid, last)
	}
	t.Logf("turns 1-2 on keeper %d; killed; turn 3 on keeper %d, thread %s resumed", pid, pid3, thread)
}

// TestRealCodexWarmCancel: cancelling a warm turn while the agent's
// command runs ends the run cancelled and leaves no process of the turn
// or of the keeper (killed with its session); the thread's next turn
// answers on a new keeper.
func TestRealCodexWarmCancel(t *testing.T) {
	w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{
		{Tool: &fakemodel.ToolCall{Name: "exec_command", Input: mustJSON(map[string]string{"cmd": "sleep 37"})}}, {Text: "slept"}, {Text: "after"}}})
	r := w.runner(t)
	ctx := warmCtx(t)
	rec := w.start(t, ctx, r, "Sleep.")
	testutil.WaitFor(t, ctx, "the agent's sleep 37 to run", 50*time.Millisecond,
		func(context.Context) (bool, error) { return len(procsWith("sleep", "37")) > 0, nil })
	kept := w.keeperPid()
	if kept == 0 || syscall.Kill(-kept, 0) != nil {
		t.Fatalf("no live keeper mid-turn (pid %d)", kept)
	}
	if _, err := r.Cancel(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	_ = r.Wait(ctx, rec.ID)
	if final, _, _ := w.st.GetRun(ctx, rec.ID); final.Status != store.RunCancelled {
		t.Errorf("status %s, want cancelled", final.Status)
	}
	testutil.WaitFor(t, ctx, "the turn's sleep 37 to be gone after the cancel", 50*time.Millisecond,
		func(context.Context) (bool, error) { return len(procsWith("sleep", "37")) == 0, nil })
	// The keeper's process group (setsid: its pid) is empty.
	testutil.WaitFor(t, ctx, "the keeper's processes to be gone after the cancel", 50*time.Millisecond,
		func(context.Context) (bool, error) { return syscall.Kill(-kept, 0) != nil, nil })
	rec = w.start(t, ctx, r, "Again.")
	text, _, last := turnText(t, ctx, r, rec.ID)
	if last != event.RunFinished || text == "" || w.keeperPid() == kept {
		t.Fatalf("the turn after the cancel: text %q last %s keeper %d (cancelled %d)", text, last, w.keeperPid(), kept)
	}
}

// untilText follows a run until its first text arrives.
func untilText(ctx context.Context, r *run.Runner, id string) {
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	_ = r.Follow(fctx, id, 0, func(e store.Event) error {
		if ev, err := event.Unmarshal(e.Data); err == nil && ev.Type == event.TextMessageContent {
			stop()
		}
		return nil
	})
}

// TestRealCodexWarmTakeover: a warm turn whose driving runner goes away
// mid-answer (it closes, dropping its driver and lease) is taken over by
// another runner on the same store and delivered once: every stored event
// delivered in order, one RUN_FINISHED, the whole answer, the keeper
// unchanged.
func TestRealCodexWarmTakeover(t *testing.T) {
	answer := strings.Repeat("word ", 200)
	w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Text: answer}}, Delay: 10 * time.Millisecond, ChunkSize: 8})
	a, b := w.runner(t), w.runner(t)
	ctx := warmCtx(t)
	rec := w.start(t, ctx, a, "First?")
	if text, _, _ := turnText(t, ctx, a, rec.ID); text != "one" {
		t.Fatalf("first turn: %q", text)
	}
	pid := w.keeperPid()
	rec = w.start(t, ctx, a, "Second?")
	untilText(ctx, a, rec.ID)
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
	if final.Status != store.RunCompleted || final.DriverEpoch < 2 || len(seqs) != len(stored) || finished != 1 || text != answer || w.keeperPid() != pid {
		t.Errorf("status %s epoch %d, delivered %d of %d, %d RUN_FINISHED, text %d bytes (want %d), keeper %d (was %d)",
			final.Status, final.DriverEpoch, len(seqs), len(stored), finished, len(text), len(answer), w.keeperPid(), pid)
	}
}

// TestRealCodexWarmDigestChange: a turn whose start-time settings differ
// from the keeper's (here the reasoning effort, baked into its argv) gets
// a new keeper that resumes the same codex thread.
func TestRealCodexWarmDigestChange(t *testing.T) {
	w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Text: "two"}}})
	r := w.runner(t)
	ctx := warmCtx(t)
	rec := w.start(t, ctx, r, "First?")
	_, thread, _ := turnText(t, ctx, r, rec.ID)
	pid := w.keeperPid()
	w.opts[codex.OptReasoningEffort] = "low"
	rec = w.start(t, ctx, r, "Second?")
	text, thread2, last := turnText(t, ctx, r, rec.ID)
	if text != "two" || thread2 != thread || thread == "" || last != event.RunFinished || w.keeperPid() == pid || pid == 0 {
		t.Fatalf("after the change: text %q thread %q (first %q) keeper %d (first %d) last %s", text, thread2, thread, w.keeperPid(), pid, last)
	}
}
