package codex_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/internal/turntest"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// newWarmEnv is the warm-session tests' world (turntest.Env) with the
// real CLI against the fake model running script. At the test's end no
// file of the keeper directories or their CODEX_HOMEs holds the key (it is
// only in the keeper's environment); then the homes kept outside /tmp
// (bubblewrap) are removed.
func newWarmEnv(t testing.TB, script fakemodel.Script) *turntest.Env {
	t.Helper()
	bin := testutil.AgentBin(t, "codex")
	srv := fakemodel.New(t, script)
	w := turntest.NewEnv(t, codex.Harness{}, codex.WarmDirPrefix, map[string]string{"OPENAI_API_KEY": canaryKey})
	w.Model = fakemodel.ModelID
	w.Options = map[string]string{codex.OptExecutable: bin, codex.OptBaseURL: srv.OpenAIURL(), codex.OptSessionsDir: t.TempDir(), codex.OptWarm: "true"}
	t.Cleanup(func() {
		w.KillKeepers()
		dirs := append([]string{w.Journals}, warmHomes(w)...)
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

// warmHomes lists the CODEX_HOMEs the keeper directories record.
func warmHomes(w *turntest.Env) []string {
	recs, _ := filepath.Glob(filepath.Join(w.Journals, codex.WarmDirPrefix+"*", "codex-home"))
	var homes []string
	for _, f := range recs {
		if b, err := os.ReadFile(f); err == nil && filepath.IsAbs(strings.TrimSpace(string(b))) {
			homes = append(homes, strings.TrimSpace(string(b)))
		}
	}
	return homes
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

// turnText follows a run to its end and returns its text, its codex
// thread and its last event's type.
func turnText(t *testing.T, ctx context.Context, r *run.Runner, id string) (text, session string, last event.Type) {
	t.Helper()
	evs := turntest.Events(t, ctx, r, id)
	for _, e := range evs {
		if strings.Contains(string(e.Marshal()), canaryKey) {
			t.Fatalf("the API key leaked into an event: %s", e.Marshal())
		}
	}
	if len(evs) > 0 {
		last = evs[len(evs)-1].Type
	}
	return turntest.Text(evs), turntest.Session(evs), last
}

// TestRealCodexWarmSession: with option warm=true, the thread's second run
// is served by the app-server that ran its first (same pid), with the
// right answer in the same codex thread; a keeper SIGKILLed between turns
// is replaced on the next turn, which resumes the thread (the model's
// request carries the earlier turns) with the right answer.
func TestRealCodexWarmSession(t *testing.T) {
	srv := fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Text: "two"}, {Text: "three"}}}
	w := newWarmEnv(t, srv)
	r := w.Runner(t)
	ctx := warmCtx(t)

	rec := w.Start(t, ctx, r, "First?")
	text, thread, last := turnText(t, ctx, r, rec.ID)
	pid := w.KeeperPid()
	if text != "one" || thread == "" || pid == 0 || last != event.RunFinished {
		t.Fatalf("first turn: text %q thread %q keeper %d last %s", text, thread, pid, last)
	}
	homes := warmHomes(w)
	if len(homes) != 1 {
		t.Fatalf("first turn: CODEX_HOMEs %q, want one", homes)
	}
	rec = w.Start(t, ctx, r, "Second?")
	text, thread2, last := turnText(t, ctx, r, rec.ID)
	if text != "two" || thread2 != thread || w.KeeperPid() != pid || syscall.Kill(pid, 0) != nil || last != event.RunFinished {
		t.Fatalf("second turn: text %q thread %q (first %q) keeper %d (first %d) last %s", text, thread2, thread, w.KeeperPid(), pid, last)
	}

	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Dead, not dying (see claudecode's TestWarmSession).
	testutil.WaitFor(t, ctx, "the killed keeper to be gone", 20*time.Millisecond,
		func(context.Context) (bool, error) { return len(testutil.SessionProcs(pid)) == 0, nil })
	rec = w.Start(t, ctx, r, "Third?")
	text, thread3, last := turnText(t, ctx, r, rec.ID)
	pid3 := w.KeeperPid()
	if text != "three" || thread3 != thread || pid3 == pid || pid3 == 0 || last != event.RunFinished {
		t.Fatalf("after the kill: text %q thread %q (first %q) keeper %d (killed %d) last %s", text, thread3, thread, pid3, pid, last)
	}
	// The killed keeper's CODEX_HOME went with its replacement.
	if _, err := os.Stat(homes[0]); !os.IsNotExist(err) || len(warmHomes(w)) != 1 || warmHomes(w)[0] == homes[0] {
		t.Errorf("after the replacement: the old CODEX_HOME %s: %v; now %q", homes[0], err, warmHomes(w))
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
	r := w.Runner(t)
	ctx := warmCtx(t)
	rec := w.Start(t, ctx, r, "Sleep.")
	testutil.WaitFor(t, ctx, "the agent's sleep 37 to run", 50*time.Millisecond,
		func(context.Context) (bool, error) { return len(procsWith("sleep", "37")) > 0, nil })
	kept := w.KeeperPid()
	if kept == 0 || syscall.Kill(-kept, 0) != nil {
		t.Fatalf("no live keeper mid-turn (pid %d)", kept)
	}
	homes := warmHomes(w)
	if _, err := r.Cancel(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	_ = r.Wait(ctx, rec.ID)
	if final, _, _ := w.Store.GetRun(ctx, rec.ID); final.Status != store.RunCancelled {
		t.Errorf("status %s, want cancelled", final.Status)
	}
	testutil.WaitFor(t, ctx, "the turn's sleep 37 to be gone after the cancel", 50*time.Millisecond,
		func(context.Context) (bool, error) { return len(procsWith("sleep", "37")) == 0, nil })
	// The keeper's process group (setsid: its pid) is empty.
	testutil.WaitFor(t, ctx, "the keeper's processes to be gone after the cancel", 50*time.Millisecond,
		func(context.Context) (bool, error) { return syscall.Kill(-kept, 0) != nil, nil })
	for _, h := range homes {
		if _, err := os.Stat(h); !os.IsNotExist(err) {
			t.Errorf("the cancelled keeper's CODEX_HOME %s is still there (%v)", h, err)
		}
	}
	rec = w.Start(t, ctx, r, "Again.")
	text, _, last := turnText(t, ctx, r, rec.ID)
	if last != event.RunFinished || text == "" || w.KeeperPid() == kept {
		t.Fatalf("the turn after the cancel: text %q last %s keeper %d (cancelled %d)", text, last, w.KeeperPid(), kept)
	}
}

// TestRealCodexWarmTakeover: a warm turn whose driving runner goes away
// mid-answer is taken over by another runner on the same store and
// delivered once, on the same keeper (turntest.Env.CheckTakeover).
func TestRealCodexWarmTakeover(t *testing.T) {
	answer := strings.Repeat("word ", 200)
	w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Text: answer}}, Delay: 10 * time.Millisecond, ChunkSize: 8})
	w.CheckTakeover(t, warmCtx(t), answer)
}

// TestRealCodexWarmDigestChange: a turn whose start-time settings differ
// from the keeper's (here the reasoning effort, baked into its argv) gets
// a new keeper that resumes the same codex thread.
func TestRealCodexWarmDigestChange(t *testing.T) {
	w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: "one"}, {Text: "two"}}})
	r := w.Runner(t)
	ctx := warmCtx(t)
	rec := w.Start(t, ctx, r, "First?")
	_, thread, _ := turnText(t, ctx, r, rec.ID)
	pid := w.KeeperPid()
	w.Options[codex.OptReasoningEffort] = "low"
	rec = w.Start(t, ctx, r, "Second?")
	text, thread2, last := turnText(t, ctx, r, rec.ID)
	if text != "two" || thread2 != thread || thread == "" || last != event.RunFinished || w.KeeperPid() == pid || pid == 0 {
		t.Fatalf("after the change: text %q thread %q (first %q) keeper %d (first %d) last %s", text, thread2, thread, w.KeeperPid(), pid, last)
	}
}

// TestRealCodexWarmKeeperOutOfReach: the agent's command, run in codex's
// own sandbox (workspace-write, and read-only for a policy that denies
// file writes), tries to reach the thread's kept app-server: a JSON-RPC
// line into the keeper directory's FIFO (beside the journals, under /tmp
// here, which codex's sandbox shows) and into any visible fd of a
// keeper's input under /proc. The app-server never gets it (the FIFO's
// name is removed once the keeper holds it; the turn client writes
// through the keeper's fd). A read-only sandbox cannot write a file in the
// directory; workspace-write can (the documented limit: /tmp is writable
// there).
func TestRealCodexWarmKeeperOutOfReach(t *testing.T) {
	for _, c := range []struct {
		name     string
		policy   *sandbox.Policy
		canWrite bool // the keeper directory is writable from the sandbox
	}{{"WorkspaceWrite", nil, true}, {"ReadOnly", &sandbox.Policy{FileWrite: sandbox.Deny}, false}} {
		t.Run(c.name, func(t *testing.T) {
			glob := "/tmp/" + strings.ReplaceAll(t.Name(), "/", "") + "*/*/" + codex.WarmDirPrefix + "*"
			line := `printf '{"id":"x","method":"turn/start"}\n'`
			attack := `for d in ` + glob + `; do ` + line + ` >>"$d/in"; echo reached >"$d/probe"; done; ls -d ` + glob +
				`; for f in /proc/[0-9]*/fd/*; do case $(readlink "$f") in *` + codex.WarmDirPrefix + `*/in*) echo "through $f"; ` + line + ` 1<>"$f" ;; esac; done`
			w := newWarmEnv(t, fakemodel.Script{Turns: []fakemodel.Turn{
				{Tool: &fakemodel.ToolCall{Name: "exec_command", Input: mustJSON(map[string]string{"cmd": attack})}}, {Text: "tried"}}})
			if !strings.HasPrefix(w.Journals, "/tmp/"+strings.ReplaceAll(t.Name(), "/", "")) {
				t.Skipf("the journal directory %s is not where the attack looks", w.Journals)
			}
			w.Def.Policy = c.policy
			r := w.Runner(t)
			ctx := warmCtx(t)
			evs := turntest.Events(t, ctx, r, w.Start(t, ctx, r, "Try.").ID)
			var out string
			for _, e := range evs {
				if e.Type == event.ToolCallResult {
					out += e.Content
				}
			}
			dirs, _ := filepath.Glob(filepath.Join(w.Journals, codex.WarmDirPrefix+"*"))
			if len(dirs) != 1 || w.KeeperPid() == 0 {
				t.Fatalf("no keeper directory (%v): the turn was not warm", dirs)
			}
			if _, err := os.Stat(filepath.Join(dirs[0], "probe")); (err == nil) != c.canWrite {
				t.Errorf("the agent's command wrote into the keeper directory %s: %v, want %v (its output: %q)", dirs[0], err == nil, c.canWrite, out)
			}
			log, _ := os.ReadFile(filepath.Join(dirs[0], "log"))
			for _, l := range strings.Split(string(log), "\n") {
				if strings.HasPrefix(l, `{"id":"x"`) || strings.Contains(l, `,"id":"x"}`) {
					t.Errorf("the agent's line reached the app-server, which answered: %.300s", l)
				}
			}
			t.Logf("the command in codex's sandbox saw: %q", out)
		})
	}
}
