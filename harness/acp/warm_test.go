package acp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// thread runs turns of one thread the way the runner does: one journal
// directory (so one keeper directory), each turn asking for the session
// the last one started.
type thread struct {
	t       *testing.T
	h       *acp.Harness
	hd      sandbox.Handle
	dir     string // the journal directory
	id      string
	session string
	args    []string
	options map[string]string
	env     map[string]string
	n       int
	// benchTurn: from Prepare to the first agent message in the journal
	firstText time.Duration
}

func newThread(t *testing.T, h *acp.Harness, hd sandbox.Handle, warm bool, args ...string) *thread {
	t.Helper()
	th := &thread{t: t, h: h, hd: hd, dir: t.TempDir(), id: fmt.Sprintf("thread-%d", time.Now().UnixNano()), args: args,
		options: map[string]string{acp.OptWarm: fmt.Sprint(warm)}}
	t.Cleanup(func() { th.stopKeeper() })
	return th
}

// turn runs one turn and returns its result and its session record.
func (th *thread) turn(tb testing.TB, prompt string) (result, map[string]any) {
	tb.Helper()
	t := th.t
	ctx := testCtx(t)
	th.n++
	req := harness.Request{Run: harness.Run{RunID: fmt.Sprintf("%s-run-%d", th.id, th.n), ThreadID: th.id}, Prompt: prompt, Session: th.session,
		Args: th.args, Options: th.options, Env: th.env, Policy: &sandbox.Policy{Default: sandbox.Allow}}
	paths, err := journal.PathsFor(th.dir, req.RunID)
	if err != nil {
		tb.Fatal(err)
	}
	req.RunDir = paths.Files
	req.Journal = paths.Journal
	req.WorkspaceRoot = th.hd.WorkspaceRoot()
	inv, err := th.h.Prepare(ctx, th.hd, req)
	if err != nil {
		tb.Fatal(err)
	}
	nonce := journal.NewNonce()
	if err := journal.Start(ctx, th.hd, journal.Spec{Paths: paths, Nonce: nonce, Agent: inv.Command, Stdin: inv.Stdin}); err != nil {
		tb.Fatal(err)
	}
	res := readJournal(t, ctx, th.h, th.hd, paths, nonce, req.Run)
	if err := th.h.Wait(ctx, req.RunID); err != nil {
		tb.Fatal(err)
	}
	var sess map[string]any
	for _, l := range res.lines {
		var m map[string]any
		if json.Unmarshal(l, &m) == nil && m["corral_acp"] == "session" {
			sess = m
			th.session, _ = m["sessionId"].(string)
		}
	}
	return res, sess
}

// keeperDir is the thread's keeper directory.
func (th *thread) keeperDir() string {
	return harness.WarmDir(harness.Request{Run: harness.Run{ThreadID: th.id}, RunDir: filepath.Join(th.dir, "x.d")}, acp.WarmDirPrefix)
}

// keeperPid is the pid of the thread's keeper (0: none recorded).
func (th *thread) keeperPid() int {
	b, err := os.ReadFile(filepath.Join(th.keeperDir(), "pid"))
	if err != nil {
		return 0
	}
	var pid int
	_, _ = fmt.Sscan(string(b), &pid)
	return pid
}

// stopKeeper kills what is left of the thread's keeper (its session).
func (th *thread) stopKeeper() {
	if pid := th.keeperPid(); pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// calls reads the scripted agent's -calls file: "METHOD PID" lines.
func calls(t *testing.T, file string) [][2]string {
	t.Helper()
	b, _ := os.ReadFile(file)
	var out [][2]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			out = append(out, [2]string{f[0], f[1]})
		}
	}
	return out
}

func methods(cs [][2]string) string {
	var m []string
	for _, c := range cs {
		m = append(m, c[0])
	}
	return strings.Join(m, " ")
}

func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// TestWarmTurns: with warm=true the thread's agent process is kept
// between its runs. The second turn goes to the same agent process with
// session/prompt only (no second initialize, no session/new or load) and
// answers right; the keeper outlives each run. Then the keeper is killed
// (its whole session): the third turn starts cold on a new process,
// loads the thread's session with session/load and answers right, and a
// fourth turn is warm again on that new process.
func TestWarmTurns(t *testing.T) {
	bin := agent(t)
	hd := newSandbox(t)
	callsFile := filepath.Join(t.TempDir(), "calls")
	th := newThread(t, newHarness(t), hd, true, bin, "-load", "-no-permission", "-calls", callsFile)
	th.session = "sess-known"

	check := func(name string, res result, sess map[string]any, prompt, warm string) {
		t.Helper()
		if last(res.events).Type != event.RunFinished || res.exit != 0 {
			t.Fatalf("%s: exit %d: %s", name, res.exit, dump(res.events))
		}
		checkWellFormed(t, res.events)
		if got := text(res.events, event.TextMessageContent); !strings.Contains(got, "Working on: "+prompt) || !strings.Contains(got, "input.txt: the input") {
			t.Errorf("%s: answer %q", name, got)
		}
		if s := customs(res.events, event.SessionStarted); len(s) != 1 || string(s[0]) != `{"id":"sess-known"}` {
			t.Errorf("%s: session.started = %s", name, s)
		}
		if sess["warm"] != warm {
			t.Errorf("%s: session record %v, want warm %q", name, sess, warm)
		}
	}

	res, sess := th.turn(t, "first")
	check("turn 1", res, sess, "first", "started")
	pid1 := th.keeperPid()
	if !alive(pid1) {
		t.Fatalf("turn 1: no live keeper after the run (pid %d)", pid1)
	}
	res, sess = th.turn(t, "second")
	check("turn 2", res, sess, "second", "kept")
	cs := calls(t, callsFile)
	if methods(cs) != "initialize load prompt prompt" || cs[0][1] != cs[3][1] {
		t.Fatalf("after two warm turns the agent was called %v: want one initialize, one load and two prompts on one process", cs)
	}
	if th.keeperPid() != pid1 || !alive(pid1) {
		t.Fatalf("the keeper changed: %d → %d", pid1, th.keeperPid())
	}

	th.stopKeeper()
	testWaitDead(t, pid1)
	res, sess = th.turn(t, "third")
	check("turn 3", res, sess, "third", "started")
	if nr := customs(res.events, acp.EventSessionNotResumed); len(nr) != 0 {
		t.Errorf("turn 3: %s", nr)
	}
	res, sess = th.turn(t, "fourth")
	check("turn 4", res, sess, "fourth", "kept")
	cs = calls(t, callsFile)
	if methods(cs) != "initialize load prompt prompt initialize load prompt prompt" || cs[4][1] == cs[0][1] || cs[4][1] != cs[7][1] {
		t.Fatalf("the agent was called %v: want the third turn cold (initialize, session/load) on a new process and the fourth warm on it", cs)
	}
	t.Logf("calls: %v; keeper %d then %d", cs, pid1, th.keeperPid())
}

func testWaitDead(t *testing.T, pid int) {
	t.Helper()
	testutil.WaitFor(t, context.Background(), fmt.Sprintf("process %d to die", pid), 10*time.Millisecond, func(context.Context) (bool, error) {
		return !alive(pid), nil
	})
}

// TestWarmFallbacks: a kept agent that cannot serve the turn is replaced
// by a cold start with session/load: another agent command (the digest
// differs), another session than the keeper holds, and a previous turn
// whose relay died mid-turn (the busy file names a dead process). The old
// keeper is gone after the cold start.
func TestWarmFallbacks(t *testing.T) {
	bin := agent(t)
	for _, c := range []struct {
		name   string
		change func(t *testing.T, th *thread)
		want   string // the agent's calls over both turns
	}{
		{"digest", func(_ *testing.T, th *thread) { th.env = map[string]string{"SOME_SETTING": "changed"} },
			"initialize load prompt initialize load prompt"},
		{"session", func(_ *testing.T, th *thread) { th.session = "sess-other" },
			"initialize load prompt initialize load new prompt"},
		{"died mid-turn", func(t *testing.T, th *thread) {
			// The last turn's relay died without clearing the busy file.
			cmd := exec.Command("true")
			if err := cmd.Run(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(th.keeperDir(), "busy"), []byte(fmt.Sprintln(cmd.Process.Pid)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "initialize load prompt initialize load prompt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hd := newSandbox(t)
			callsFile := filepath.Join(t.TempDir(), "calls")
			th := newThread(t, newHarness(t), hd, true, bin, "-load", "-no-permission", "-calls", callsFile)
			th.session = "sess-known"
			if res, _ := th.turn(t, "one"); res.exit != 0 {
				t.Fatalf("turn 1: %s", dump(res.events))
			}
			pid1 := th.keeperPid()
			c.change(t, th)
			res, sess := th.turn(t, "two")
			if res.exit != 0 || sess["warm"] != "started" {
				t.Fatalf("turn 2: session %v: %s", sess, dump(res.events))
			}
			if alive(pid1) || th.keeperPid() == pid1 {
				t.Errorf("the old keeper %d is still alive or still recorded (now %d)", pid1, th.keeperPid())
			}
			if cs := calls(t, callsFile); methods(cs) != c.want {
				t.Errorf("calls %v, want %s", cs, c.want)
			}
		})
	}
}

// TestWarmCancelLeavesNothing: a warm turn that is cancelled leaves no
// process of the kept agent: neither when the agent ends its turn after
// session/cancel (the client asks the relay to stop the keeper) nor when
// it ignores it and the cancel grace runs out (the runner kills the
// journaled relay, whose SIGTERM trap stops the keeper's whole session
// and every process marked with its directory). The turn before it was
// warm, so the keeper is one a previous run left running. The thread's
// next turn starts cold.
func TestWarmCancelLeavesNothing(t *testing.T) {
	bin := agent(t)
	for _, c := range []struct {
		name  string
		grace time.Duration
		args  []string
	}{
		{"cooperative", time.Minute, nil},
		{"stubborn", 200 * time.Millisecond, []string{"-ignore-cancel"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := acp.New(acp.Options{StartTimeout: 30 * time.Second, ExitGrace: time.Minute, CancelGrace: c.grace, KillGrace: 500 * time.Millisecond})
			t.Cleanup(func() { _ = h.Close(testCtx(t)) })
			r := newRunner(t, h, nil)
			ctx := testCtx(t)
			callsFile := filepath.Join(t.TempDir(), "calls")
			mark := fmt.Sprintf("warm-cancel-%d", time.Now().UnixNano())
			killMarked(t, mark)
			args := append([]string{bin, "-no-permission", "-children", "-hang-on", "HANG", "-calls", callsFile}, c.args...)
			opts := map[string]string{acp.OptWarm: "true"}
			start := func(thread, prompt string) string {
				rec, err := r.Start(ctx, run.StartRequest{Definition: "d", Thread: thread, Harness: acp.Name, Prompt: prompt,
					Args: args, Env: map[string]string{markEnv: mark}, Options: opts})
				if err != nil {
					t.Fatal(err)
				}
				return rec.ID
			}
			id := start("", "warm up")
			evs := follow(t, ctx, r, id)
			if last(evs).Type != event.RunFinished {
				t.Fatalf("turn 1: %s", dump(evs))
			}
			first, _, _ := r.Store().GetRun(ctx, id)
			if len(marked(t, mark)) == 0 {
				t.Fatal("no kept agent after the first warm turn")
			}
			id = start(first.ThreadID, "HANG now")
			cancelled := false
			evs = nil
			if err := r.Follow(ctx, id, 0, func(e store.Event) error {
				ev, err := event.Unmarshal(e.Data)
				if err != nil {
					return err
				}
				evs = append(evs, ev)
				if ev.Type == event.TextMessageContent && !cancelled {
					cancelled = true
					_, err = r.Cancel(ctx, id)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := h.Wait(ctx, id); err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(ctx, id); err != nil {
				t.Fatal(err)
			}
			final, _, _ := r.Store().GetRun(ctx, id)
			left := marked(t, mark)
			if !last(evs).Cancelled() || final.Status != store.RunCancelled {
				t.Errorf("last event %s %s, status %s", last(evs).Type, last(evs).Code, final.Status)
			}
			if len(left) != 0 {
				t.Errorf("processes left after the cancel: %d%s", len(left), describe(left))
			}
			if cs := calls(t, callsFile); methods(cs) != "initialize new prompt prompt" || cs[0][1] != cs[3][1] {
				t.Errorf("the cancelled turn was not warm: calls %v", cs)
			}
			id = start(first.ThreadID, "after")
			evs = follow(t, ctx, r, id)
			if last(evs).Type != event.RunFinished || !strings.Contains(text(evs, event.TextMessageContent), "Working on: after") {
				t.Fatalf("turn after the cancel: %s", dump(evs))
			}
			if cs := calls(t, callsFile); len(cs) < 5 || cs[4][0] != "initialize" || cs[4][1] == cs[0][1] {
				t.Errorf("the turn after the cancel was not cold on a new process: calls %v", cs)
			}
			t.Logf("%s: run %s, processes left %d, calls %v", c.name, final.Status, len(left), calls(t, callsFile))
		})
	}
}

// BenchmarkNextTurn is the pair: a thread's next turn started cold (a new
// agent process, initialize, session/load) and warm (session/prompt to the
// kept agent), from Prepare to the end of the journal; first-text-ms is
// the median from Prepare to the journal's first agent message.
func BenchmarkNextTurn(b *testing.B) {
	for _, warm := range []bool{false, true} {
		name := "cold"
		if warm {
			name = "warm"
		}
		b.Run(name, func(b *testing.B) {
			bin := agentForBench(b)
			hd := newSandboxTB(b)
			h := acp.New(acp.Options{StartTimeout: 30 * time.Second, ExitGrace: 2 * time.Second})
			b.Cleanup(func() { _ = h.Close(context.Background()) })
			th := &thread{h: h, hd: hd, dir: b.TempDir(), id: fmt.Sprintf("bench-%d", time.Now().UnixNano()),
				args: []string{bin, "-load", "-no-permission"}, options: map[string]string{acp.OptWarm: fmt.Sprint(warm)}, session: "sess-known"}
			b.Cleanup(th.stopKeeper)
			if res := th.benchTurn(b, "warm up"); res != 0 {
				b.Fatalf("warm-up turn exited %d", res)
			}
			var first []time.Duration
			for b.Loop() {
				if res := th.benchTurn(b, "next"); res != 0 {
					b.Fatalf("turn exited %d", res)
				}
				first = append(first, th.firstText)
			}
			slices.Sort(first)
			b.ReportMetric(float64(first[len(first)/2].Microseconds())/1000, "first-text-ms")
		})
	}
}

func agentForBench(b *testing.B) string {
	b.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		b.Skip("the go tool is needed to build the scripted agent")
	}
	bin, err := agentPath()
	if err != nil {
		b.Fatal(err)
	}
	return bin
}

func newSandboxTB(b *testing.B) sandbox.Handle {
	b.Helper()
	p, err := local.New(local.Options{BaseDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	h, err := p.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Destroy(context.Background()) })
	if err := h.FS().WriteFile(context.Background(), "input.txt", []byte("the input\n")); err != nil {
		b.Fatal(err)
	}
	return h
}

// benchTurn runs one turn of the thread and returns the journal's exit
// code; it reads the journal to its end but translates nothing.
func (th *thread) benchTurn(b *testing.B, prompt string) int {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	th.n++
	req := harness.Request{Run: harness.Run{RunID: fmt.Sprintf("%s-run-%d", th.id, th.n), ThreadID: th.id}, Prompt: prompt, Session: th.session,
		Args: th.args, Options: th.options, Policy: &sandbox.Policy{Default: sandbox.Allow}}
	paths, err := journal.PathsFor(th.dir, req.RunID)
	if err != nil {
		b.Fatal(err)
	}
	req.RunDir, req.Journal, req.WorkspaceRoot = paths.Files, paths.Journal, th.hd.WorkspaceRoot()
	t0 := time.Now()
	th.firstText = 0
	inv, err := th.h.Prepare(ctx, th.hd, req)
	if err != nil {
		b.Fatal(err)
	}
	nonce := journal.NewNonce()
	if err := journal.Start(ctx, th.hd, journal.Spec{Paths: paths, Nonce: nonce, Agent: inv.Command, Stdin: inv.Stdin}); err != nil {
		b.Fatal(err)
	}
	rd := &journal.Reader{Handle: th.hd, Paths: paths, Nonce: nonce, FirstByteTimeout: 30 * time.Second}
	exit, err := rd.Read(ctx, 0, func(l journal.Line) error {
		if th.firstText == 0 && strings.Contains(string(l.Data), `"agent_message_chunk"`) {
			th.firstText = time.Since(t0)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := th.h.Wait(ctx, req.RunID); err != nil {
		b.Fatal(err)
	}
	return exit.Code
}

// warmCrashRequest is the warm thread of TestWarmTakeover's runs.
func warmCrashRequest(hd sandbox.Handle, jdir, bin, runID, prompt, session string) (harness.Request, journal.Paths, error) {
	paths, err := journal.PathsFor(jdir, runID)
	if err != nil {
		return harness.Request{}, paths, err
	}
	return harness.Request{Run: harness.Run{RunID: runID, ThreadID: "t-warm"}, Prompt: prompt, Session: session,
		Args:    []string{bin, "-no-permission", "-load", "-pause", filepath.Join(jdir, "go-on"), "-calls", filepath.Join(jdir, "calls")},
		Options: map[string]string{acp.OptWarm: "true"}, RunDir: paths.Files, Journal: paths.Journal,
		WorkspaceRoot: hd.WorkspaceRoot(), Policy: &sandbox.Policy{Default: sandbox.Allow}}, paths, nil
}

// warmCrashTurns is the crash child's warm thread: a first turn to its
// end (the keeper then holds sess-known), and the request of the second,
// which pauses mid-answer (the child dies there).
func warmCrashTurns(ctx context.Context, h *acp.Harness, hd sandbox.Handle, jdir, bin string) (harness.Request, error) {
	req, paths, err := warmCrashRequest(hd, jdir, bin, "run-warm-1", "one", "sess-known")
	if err != nil {
		return req, err
	}
	inv, err := h.Prepare(ctx, hd, req)
	if err != nil {
		return req, err
	}
	nonce := journal.NewNonce()
	if err := journal.Start(ctx, hd, journal.Spec{Paths: paths, Nonce: nonce, Agent: inv.Command}); err != nil {
		return req, err
	}
	rd := &journal.Reader{Handle: hd, Paths: paths, Nonce: nonce, FirstByteTimeout: 30 * time.Second}
	exit, err := rd.Read(ctx, 0, func(journal.Line) error { return nil })
	if err != nil {
		return req, err
	}
	if exit.Code != 0 {
		return req, fmt.Errorf("the first warm turn exited %d", exit.Code)
	}
	if err := h.Wait(ctx, req.RunID); err != nil {
		return req, err
	}
	req, _, err = warmCrashRequest(hd, jdir, bin, "run-crash", "PAUSE two", "sess-known")
	return req, err
}

// TestWarmTakeover: the corral process that drives a warm turn dies
// mid-answer (the turn runs on the keeper a previous run left). Another
// process takes the run over (Harness.Reattach): its client attaches to
// the same kept agent, and the turn ends with the whole answer, every
// line of it once; the kept agent is the same process before and after,
// and the thread's next turn is warm on it.
func TestWarmTakeover(t *testing.T) {
	bin := agent(t)
	hd := newSandbox(t)
	jdir := t.TempDir()
	nonce := journal.NewNonce()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", "CRASH_WARM=1", "CRASH_SANDBOX="+hd.ID(), "CRASH_JOURNALS="+jdir, "CRASH_AGENT="+bin, "CRASH_NONCE="+nonce)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the crashing host failed before it crashed: %v\n%s", err, out)
	}
	th := &thread{t: t, hd: hd, dir: jdir, id: "t-warm"}
	t.Cleanup(th.stopKeeper)
	pid := th.keeperPid()
	ctx := testCtx(t)
	h := newHarness(t)
	req, paths, err := warmCrashRequest(hd, jdir, bin, "run-crash", "PAUSE two", "sess-known")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Reattach(ctx, hd, req); err != nil {
		t.Fatal(err)
	}
	// Let the agent go on once the new client holds the session.
	go func() {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if b, _ := os.ReadFile(paths.Journal); strings.Contains(string(b), `"corral_acp":"reattach"`) {
				break
			}
		}
		_ = os.WriteFile(filepath.Join(jdir, "go-on"), nil, 0o600)
	}()
	res := readJournal(t, ctx, h, hd, paths, nonce, req.Run)
	if err := h.Wait(ctx, req.RunID); err != nil {
		t.Fatal(err)
	}
	evs := res.events
	checkWellFormed(t, evs)
	if last(evs).Type != event.RunFinished || res.exit != 0 {
		t.Fatalf("exit %d: %s", res.exit, dump(evs))
	}
	got := text(evs, event.TextMessageContent)
	if strings.Count(got, "Working on: PAUSE two") != 1 || strings.Count(got, "input.txt: the input") != 1 {
		t.Errorf("the answer, every line once: %q", got)
	}
	if th.keeperPid() != pid || !alive(pid) {
		t.Errorf("the kept agent changed: %d → %d", pid, th.keeperPid())
	}
	th.h, th.args, th.options, th.session = h, req.Args, req.Options, "sess-known"
	if res, sess := th.turn(t, "three"); res.exit != 0 || sess["warm"] != "kept" {
		t.Fatalf("the next turn: session %v: %s", sess, dump(res.events))
	}
	cs := calls(t, filepath.Join(jdir, "calls"))
	if methods(cs) != "initialize load prompt prompt prompt" || cs[0][1] != cs[4][1] {
		t.Errorf("calls %v: want one process, one initialize", cs)
	}
	t.Logf("keeper %d; calls %v", pid, cs)
}
