package run_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
	"github.com/d10ffeed/corral/store/pgstore/pgtest"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

type env struct {
	st  store.Store
	def *sandbox.Definition
}

func newEnv(t *testing.T) *env {
	t.Helper()
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	return &env{st: st, def: &sandbox.Definition{ID: "d", Provider: p}}
}

func (e *env) runner(t *testing.T, opts run.Options) *run.Runner {
	t.Helper()
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 2 * time.Second
	}
	opts.PollInterval = 50 * time.Millisecond
	r, err := run.New(e.st, []*sandbox.Definition{e.def}, []harness.Harness{command.Harness{}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func collect(t *testing.T, r *run.Runner, ctx context.Context, id string, after int64, attach bool) []event.Event {
	t.Helper()
	var out []event.Event
	last := after
	fn := func(e store.Event) error {
		if e.Seq != last+1 {
			t.Fatalf("sequence gap or repeat: got %d after %d", e.Seq, last)
		}
		last = e.Seq
		ev, err := event.Unmarshal(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
		return nil
	}
	var err error
	if attach {
		err = r.Attach(ctx, id, after, fn)
	} else {
		err = r.Follow(ctx, id, after, fn)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// lines returns the text of the content events, in order.
func lines(evs []event.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Type == event.TextMessageContent {
			out = append(out, strings.TrimSuffix(e.Delta, "\n"))
		}
	}
	return out
}

func seq(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i + 1)
	}
	return out
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestRunToCompletion(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, run.Options{})
	c := ctx(t)
	rec, err := r.Start(c, run.StartRequest{Definition: "d", Thread: "t", Harness: command.Name, Args: []string{"sh", "-c", "for i in $(seq 1 100); do echo $i; done"}})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, r, c, rec.ID, 0, false)
	if got := lines(evs); strings.Join(got, ",") != strings.Join(seq(100), ",") {
		t.Fatalf("lines = %v", got)
	}
	if evs[0].Type != event.RunStarted || evs[len(evs)-1].Type != event.RunFinished {
		t.Errorf("first %s last %s", evs[0].Type, evs[len(evs)-1].Type)
	}
	if err := r.Wait(c, rec.ID); err != nil {
		t.Fatal(err)
	}
	got, _, _ := e.st.GetRun(c, rec.ID)
	if got.Status != store.RunCompleted || got.ExitCode == nil || *got.ExitCode != 0 || got.FinishedAt.IsZero() {
		t.Errorf("record = %+v", got)
	}
	if active, ok, _ := e.st.ActiveRun(c, "t", ""); ok {
		t.Errorf("a finished run is still active: %+v", active)
	}
}

func TestRunFailsWithExitCode(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, run.Options{})
	c := ctx(t)
	rec, err := r.Start(c, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"sh", "-c", "echo oops; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, r, c, rec.ID, 0, false)
	last := evs[len(evs)-1]
	if last.Type != event.RunError || last.ExitCode == nil || *last.ExitCode != 3 {
		t.Errorf("last event %+v", last)
	}
	_ = r.Wait(c, rec.ID)
	got, _, _ := e.st.GetRun(c, rec.ID)
	if got.Status != store.RunFailed || *got.ExitCode != 3 {
		t.Errorf("record = %+v", got)
	}
}

// TestDetachAndTakeOver detaches a run from one runner mid-stream and
// attaches from a second runner (standing in for another process): every
// line arrives exactly once, in order.
// followThenDetach follows run id on r until event n, then detaches it;
// it returns the last sequence number seen.
func followThenDetach(t *testing.T, r *run.Runner, c context.Context, id string, n int64) int64 {
	t.Helper()
	var seen int64
	fctx, stop := context.WithCancel(c)
	defer stop()
	_ = r.Follow(fctx, id, 0, func(ev store.Event) error {
		seen = ev.Seq
		if ev.Seq >= n {
			stop()
		}
		return nil
	})
	if err := r.Detach(c, id); err != nil {
		t.Fatal(err)
	}
	return seen
}

func TestDetachAndTakeOver(t *testing.T) {
	e := newEnv(t)
	a := e.runner(t, run.Options{})
	b := e.runner(t, run.Options{})
	c := ctx(t)
	rec, err := a.Start(c, run.StartRequest{Definition: "d", Thread: "t", Harness: command.Name,
		Args: []string{"sh", "-c", "for i in $(seq 1 60); do echo $i; sleep 0.01; done"}})
	if err != nil {
		t.Fatal(err)
	}
	// Let some lines through, then detach.
	seen := followThenDetach(t, a, c, rec.ID, 15)
	detached, _, _ := e.st.GetRun(c, rec.ID)
	if detached.DetachedSince.IsZero() || detached.Status != store.RunRunning {
		t.Fatalf("after detach: %+v", detached)
	}
	rest := collect(t, b, c, rec.ID, seen, true)
	all := collect(t, b, c, rec.ID, 0, false)
	if got := lines(all); strings.Join(got, ",") != strings.Join(seq(60), ",") {
		t.Fatalf("the log holds %v", got)
	}
	if len(rest) == 0 || rest[len(rest)-1].Type != event.RunFinished {
		t.Errorf("the attach did not deliver the remainder to the end: %d events", len(rest))
	}
	_ = b.Wait(c, rec.ID)
	final, _, _ := e.st.GetRun(c, rec.ID)
	if final.Status != store.RunCompleted || final.DriverEpoch != 2 || !final.DetachedSince.IsZero() {
		t.Errorf("final record %+v", final)
	}
}

func TestCancel(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, run.Options{})
	c := ctx(t)
	rec, err := r.Start(c, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"sh", "-c", "echo started; (sleep 600) & sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until it is running.
	fctx, stop := context.WithCancel(c)
	_ = r.Follow(fctx, rec.ID, 0, func(ev store.Event) error {
		if ev.Type == string(event.TextMessageContent) {
			stop()
		}
		return nil
	})
	begin := time.Now()
	if _, err := r.Cancel(c, rec.ID); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, r, c, rec.ID, 0, false)
	t.Logf("cancel took %v", time.Since(begin)) // a figure, not a verdict
	last := evs[len(evs)-1]
	if !last.Cancelled() {
		t.Errorf("last event %+v", last)
	}
	_ = r.Wait(c, rec.ID)
	got, _, _ := e.st.GetRun(c, rec.ID)
	if got.Status != store.RunCancelled {
		t.Errorf("status %s", got.Status)
	}
	// Attaching to a cancelled run replays it; it never comes back.
	again := collect(t, r, c, rec.ID, 0, true)
	if len(again) != len(evs) {
		t.Errorf("attach to a cancelled run: %d events, want %d", len(again), len(evs))
	}
	if got, _, _ := e.st.GetRun(c, rec.ID); got.Status != store.RunCancelled {
		t.Errorf("after attach: %s", got.Status)
	}
}

func TestCancelDetachedRun(t *testing.T) {
	e := newEnv(t)
	a := e.runner(t, run.Options{})
	b := e.runner(t, run.Options{})
	c := ctx(t)
	rec, err := a.Start(c, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"sh", "-c", "echo up; sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithCancel(c)
	_ = a.Follow(fctx, rec.ID, 0, func(ev store.Event) error {
		if ev.Type == string(event.TextMessageContent) {
			stop()
		}
		return nil
	})
	if err := a.Detach(c, rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Cancel(c, rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(c, rec.ID); err != nil {
		t.Fatal(err)
	}
	got, _, _ := e.st.GetRun(c, rec.ID)
	if got.Status != store.RunCancelled {
		t.Errorf("status %s", got.Status)
	}
}

func TestUnknownInputs(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, run.Options{})
	c := ctx(t)
	if _, err := r.Start(c, run.StartRequest{Definition: "nope", Harness: command.Name, Args: []string{"true"}}); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("unknown definition: %v", err)
	}
	if _, err := r.Start(c, run.StartRequest{Definition: "d", Harness: "nope"}); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("unknown harness: %v", err)
	}
	if err := r.Attach(c, "run-nope", 0, func(store.Event) error { return nil }); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("unknown run: %v", err)
	}
}

func TestConformanceLocalMemory(t *testing.T) {
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	runtest.Run(t, runtest.Harness{Provider: p, Store: func(t *testing.T) store.Store {
		st := memstore.New(memstore.Options{})
		t.Cleanup(func() { st.Close() })
		return st
	}})
}

func TestConformanceLocalSQLite(t *testing.T) {
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	runtest.Run(t, runtest.Harness{Provider: p, Store: func(t *testing.T) store.Store {
		st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "corral.db"), sqlitestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}})
}

func TestConformanceLocalPostgres(t *testing.T) {
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	runtest.Run(t, runtest.Harness{Provider: p, Store: func(t *testing.T) store.Store { return pgtest.Open(t) }})
}

func TestFileChangedAndHook(t *testing.T) {
	testutil.NeedGit(t)
	repo := testutil.BareRepo(t, map[string]string{"keep.txt": "keep\n", "gone.txt": "bye\n"})
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	defer st.Close()
	var mu sync.Mutex
	var files []sandbox.FileEvent
	def := &sandbox.Definition{ID: "d", Provider: p, Workspace: &sandbox.Workspace{Source: &sandbox.Source{Git: repo}},
		Hooks: sandbox.Hooks{OnFile: func(_ context.Context, ev sandbox.FileEvent) { mu.Lock(); files = append(files, ev); mu.Unlock() }}}
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{command.Harness{}}, run.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	c := ctx(t)
	rec, err := r.Start(c, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"sh", "-c", "echo more >> keep.txt; rm gone.txt; echo new > new.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, r, c, rec.ID, 0, false)
	var change event.FileChange
	for _, e := range evs {
		if e.Type == event.Custom && e.Name == event.FileChanged {
			if err := json.Unmarshal(e.Value, &change); err != nil {
				t.Fatal(err)
			}
		}
	}
	if strings.Join(change.Files, ",") != "gone.txt,keep.txt,new.txt" || !strings.Contains(change.Patch, "+new") {
		t.Errorf("file.changed = %+v", change)
	}
	_ = r.Wait(c, rec.ID)
	mu.Lock()
	defer mu.Unlock()
	want := map[string]string{"/workspace/gone.txt": "delete", "/workspace/keep.txt": "change", "/workspace/new.txt": "create"}
	if len(files) != 3 {
		t.Fatalf("OnFile saw %+v", files)
	}
	for _, f := range files {
		if want[f.Path] != f.Op {
			t.Errorf("OnFile %+v, want op %s", f, want[f.Path])
		}
	}
}

// TestReaperSweepsJournals leaves the journal of a finished run behind (a
// driver that died before cleaning up) and lets a reaper pass delete it,
// while the journal of a running run stays.
func TestReaperSweepsJournals(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, run.Options{JournalDir: "/tmp/corral-sweep-" + fmt.Sprint(time.Now().UnixNano())})
	c := ctx(t)
	done, err := r.Start(c, run.StartRequest{Definition: "d", Thread: "t", Harness: command.Name, Args: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Follow(c, done.ID, 0, func(store.Event) error { return nil })
	_ = r.Wait(c, done.ID)
	inst, ok, err := e.st.GetInstance(c, e.def.KeyFor("t", done.ID, ""))
	if err != nil || !ok {
		t.Fatalf("instance: %v %v", ok, err)
	}
	h, err := e.def.Provider.Resume(c, inst.ProviderSandboxID)
	if err != nil {
		t.Fatal(err)
	}
	// Put a journal back for the finished run, as a dead driver would have
	// left it.
	p, _ := journal.PathsFor(r.JournalDir(), done.ID)
	if err := journal.Start(c, h, journal.Spec{Paths: p, Nonce: done.JournalNonce, Agent: sandbox.Command{Args: []string{"true"}}}); err != nil {
		t.Fatal(err)
	}
	waitFile := time.Now().Add(2 * time.Minute) // a hang guard
	for {
		st, _ := journal.Probe(c, h, p, done.JournalNonce)
		if st.Finished {
			break
		}
		if time.Now().After(waitFile) {
			t.Fatal("the journal of the finished run never showed its exit")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rep, err := r.Reap(c, run.ReapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Journals != 1 {
		t.Errorf("the reaper deleted %d journals, want 1: %+v", rep.Journals, rep)
	}
	if st, _ := journal.Probe(c, h, p, done.JournalNonce); st.Exists {
		t.Error("the finished run's journal is still there")
	}
}

type missingCLI struct{ command.Harness }

func (missingCLI) Name() string { return "missing-cli" }
func (missingCLI) InstallHint() string {
	return "the fake CLI is not installed in the sandbox: install it"
}

func TestMissingAgentCLI(t *testing.T) {
	e := newEnv(t)
	r, err := run.New(e.st, []*sandbox.Definition{e.def}, []harness.Harness{missingCLI{}}, run.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	c := ctx(t)
	rec, err := r.Start(c, run.StartRequest{Definition: "d", Harness: "missing-cli", Args: []string{"corral-no-such-agent-cli", "-p"}})
	if err != nil {
		t.Fatal(err)
	}
	var last event.Event
	_ = r.Follow(c, rec.ID, 0, func(se store.Event) error {
		ev, err := event.Unmarshal(se.Data)
		last = ev
		return err
	})
	_ = r.Wait(c, rec.ID)
	if last.Type != event.RunError || last.Code != "agent-missing" || !strings.Contains(last.Message, "not installed in the sandbox") {
		t.Errorf("last event %+v: want RUN_ERROR agent-missing with the install hint", last)
	}
	got, _, _ := e.st.GetRun(c, rec.ID)
	if got.Status != store.RunFailed || !strings.Contains(got.Error, "not installed in the sandbox") || !strings.Contains(got.Error, "corral-no-such-agent-cli") {
		t.Errorf("record %+v: want a failure naming the CLI and how to install it", got)
	}
}

// TestFirstOutputIsAppendedAtOnce: the agent's first line reaches a
// follower while the agent still runs, even when the flush interval is
// far longer than the run (the opening events' append does not start the
// interval). The agent waits for a file the test makes only after the
// text arrived, so an append held back to the run's end would hang the
// test until its guard.
func TestFirstOutputIsAppendedAtOnce(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, run.Options{FlushInterval: time.Hour})
	c := ctx(t)
	gate := filepath.Join(t.TempDir(), "go")
	rec, err := r.Start(c, run.StartRequest{Definition: "d", Thread: "t", Harness: command.Name,
		Args: []string{"sh", "-c", `echo hi; while [ ! -e "$1" ]; do sleep 0.02; done; echo bye`, "agent", gate}})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	err = r.Follow(c, rec.ID, 0, func(se store.Event) error {
		ev, err := event.Unmarshal(se.Data)
		if err != nil {
			return err
		}
		if ev.Type != event.TextMessageContent {
			return nil
		}
		texts = append(texts, strings.TrimSpace(ev.Delta))
		if len(texts) == 1 {
			got, _, err := e.st.GetRun(c, rec.ID)
			if err != nil {
				return err
			}
			if got.Status != store.RunRunning {
				t.Errorf("the first text arrived with the run %s, want it while running", got.Status)
			}
			return os.WriteFile(gate, nil, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(texts, ",") != "hi,bye" {
		t.Errorf("texts = %q, want hi, bye", texts)
	}
}
